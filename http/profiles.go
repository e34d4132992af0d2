package http

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/partmap/partmap"
)

// listReply is the body of a list or search reply.
type listReply struct {
	Profiles   []partmap.Profile `json:"profiles"`
	NextCursor *string           `json:"nextCursor"`
}

func (s *Server) handleListProfiles(w http.ResponseWriter, r *http.Request, q url.Values) error {
	var opts partmap.ListOptions
	if v, err := oneParam(q, "limit", false); err != nil {
		return err
	} else if v != "" {
		if opts.Limit, err = strconv.Atoi(v); err != nil || opts.Limit < 1 {
			return partmap.Errorf(partmap.EINVALID, "limit must be an integer from 1 to %d, not %q", partmap.MaxPageLimit, v)
		}
	}
	cursor, err := oneParam(q, "cursor", false)
	if err != nil {
		return err
	}
	opts.Cursor = cursor
	// Every other parameter is a search condition, FIELD=VALUE; the store
	// refuses fields that are not indexed.
	for _, name := range slices.Sorted(maps.Keys(q)) {
		if name == "limit" || name == "cursor" {
			continue
		}
		v, err := oneParam(q, name, false)
		if err != nil {
			return err
		}
		opts.Where = append(opts.Where, partmap.Match{Field: name, Value: v})
	}
	page, err := s.store.ListProfiles(r.Context(), opts)
	if err != nil {
		return err
	}
	reply := listReply{Profiles: make([]partmap.Profile, len(page.Profiles))}
	for i, rec := range page.Profiles {
		reply.Profiles[i] = rec.Profile
	}
	if page.NextCursor != "" {
		reply.NextCursor = &page.NextCursor
	}
	return writeJSON(w, http.StatusOK, reply)
}

func (c *Client) ListProfiles(ctx context.Context, opts partmap.ListOptions) (partmap.Page, error) {
	q := url.Values{}
	if opts.Limit != 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	for _, m := range opts.Where {
		if m.Field == "limit" || m.Field == "cursor" {
			return partmap.Page{}, &partmap.Error{Code: partmap.EINVALID, Field: m.Field,
				Message: fmt.Sprintf("cannot search by %q over HTTP: the name is taken by paging", m.Field)}
		}
		if _, dup := q[m.Field]; dup {
			return partmap.Page{}, &partmap.Error{Code: partmap.EINVALID, Field: m.Field, Message: fmt.Sprintf("%q is named twice; a field holds one value", m.Field)}
		}
		q.Set(m.Field, m.Value)
	}
	var out listReply
	if _, err := c.do(ctx, request{method: "GET", path: "/customer-profiles", query: q}, &out); err != nil {
		return partmap.Page{}, err
	}
	page := partmap.Page{Profiles: make([]partmap.Record, len(out.Profiles))}
	for i, p := range out.Profiles {
		page.Profiles[i] = partmap.Record{Profile: p}
	}
	if out.NextCursor != nil {
		page.NextCursor = *out.NextCursor
	}
	return page, nil
}
