package http

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/partmap/partmap"
)

// ResizeJSON is the reply of the resize routes.
type ResizeJSON struct {
	State          string `json:"state"` // "idle" or "running"
	Partitions     int    `json:"partitions"`
	Version        int    `json:"version"`
	FromPartitions int    `json:"fromPartitions,omitempty"`
	ToPartitions   int    `json:"toPartitions,omitempty"`
	Copied         int    `json:"copied,omitempty"`
	Total          int    `json:"total,omitempty"`
	LastError      string `json:"lastError,omitempty"`
}

func resizeJSON(st partmap.ResizeStatus) ResizeJSON {
	out := ResizeJSON{State: "idle", Partitions: st.Partitions, Version: st.Generation, LastError: st.LastError}
	if st.Running {
		out.State, out.FromPartitions, out.ToPartitions, out.Copied, out.Total = "running", st.Partitions, st.To, st.Copied, st.Partitions
	}
	return out
}

func (s *Server) handleResize(w http.ResponseWriter, r *http.Request, q url.Values) error {
	v, err := oneParam(q, "partitions", true)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return partmap.Errorf(partmap.EINVALID, "partitions must be an integer from 1 to %d, not %q", partmap.MaxPartitions, v)
	}
	st, err := s.store.Resize(r.Context(), n)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusAccepted, resizeJSON(st))
}

func (s *Server) handleResizeStatus(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	st, err := s.store.ResizeStatus(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, resizeJSON(st))
}

func statusOf(out ResizeJSON) partmap.ResizeStatus {
	st := partmap.ResizeStatus{Partitions: out.Partitions, Generation: out.Version, LastError: out.LastError}
	if out.State == "running" {
		st.Running, st.To, st.Copied = true, out.ToPartitions, out.Copied
	}
	return st
}

func (c *Client) Resize(ctx context.Context, partitions int) (partmap.ResizeStatus, error) {
	var out ResizeJSON
	_, err := c.do(ctx, request{method: "POST", path: "/resize", query: url.Values{"partitions": {strconv.Itoa(partitions)}}}, &out)
	return statusOf(out), err
}

func (c *Client) ResizeStatus(ctx context.Context) (partmap.ResizeStatus, error) {
	var out ResizeJSON
	_, err := c.do(ctx, request{method: "GET", path: "/resize"}, &out)
	return statusOf(out), err
}
