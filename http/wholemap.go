package http

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/partmap/partmap"
)

// wholeMapLockReply is the reply of POST /whole-map-lock.
type wholeMapLockReply struct {
	Lease   string    `json:"lease"`
	Expires time.Time `json:"expires"`
}

func (s *Server) handleLockWholeMap(w http.ResponseWriter, r *http.Request, q url.Values) error {
	v, err := oneParam(q, "seconds", true)
	if err != nil {
		return err
	}
	max := int(partmap.MaxWholeMapLock / time.Second)
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return partmap.Errorf(partmap.EINVALID, "seconds must be an integer from 1 to %d, not %q", max, v)
	}
	l, err := s.store.LockWholeMap(r.Context(), time.Duration(n)*time.Second)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, wholeMapLockReply{Lease: l.Lease, Expires: l.Expires.UTC()})
}

func (s *Server) handleUnlockWholeMap(w http.ResponseWriter, r *http.Request, q url.Values) error {
	lease, err := oneParam(q, "lease", true)
	if err != nil {
		return err
	}
	if err := s.store.UnlockWholeMap(r.Context(), lease); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (c *Client) LockWholeMap(ctx context.Context, d time.Duration) (partmap.WholeMapLock, error) {
	if d < time.Second || d%time.Second != 0 {
		return partmap.WholeMapLock{}, partmap.Errorf(partmap.EINVALID, "over HTTP the whole-map lock is held for whole seconds, not %v", d)
	}
	var out wholeMapLockReply
	q := url.Values{"seconds": {strconv.Itoa(int(d / time.Second))}}
	// Not retried on conflict: a held whole-map lock will not clear soon.
	if _, err := c.once(ctx, request{method: "POST", path: "/whole-map-lock", query: q}, c.base+"/whole-map-lock?"+q.Encode(), &out); err != nil {
		return partmap.WholeMapLock{}, err
	}
	return partmap.WholeMapLock{Lease: out.Lease, Expires: out.Expires}, nil
}

func (c *Client) UnlockWholeMap(ctx context.Context, lease string) error {
	_, err := c.do(ctx, request{method: "DELETE", path: "/whole-map-lock", query: url.Values{"lease": {lease}}}, nil)
	return err
}
