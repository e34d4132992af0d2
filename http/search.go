package http

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/partmap/partmap"
)

// indexesReply is the body of GET /indexes.
type indexesReply struct {
	Indexes []partmap.IndexInfo `json:"indexes"`
}

func (s *Server) handleListIndexes(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	infos, err := s.store.ListIndexes(r.Context())
	if err != nil {
		return err
	}
	if infos == nil {
		infos = []partmap.IndexInfo{}
	}
	return writeJSON(w, http.StatusOK, indexesReply{infos})
}

// parseIndexDefinition reads a POST /indexes body strictly: an unknown
// key is a mistake, not something to ignore.
func parseIndexDefinition(body []byte) (partmap.IndexDefinition, error) {
	var def partmap.IndexDefinition
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&def); err != nil {
		return def, partmap.Errorf(partmap.EMALFORMEDJSON, "the index definition is not the JSON it should be: %v", err)
	}
	if dec.More() {
		return def, partmap.Errorf(partmap.EMALFORMEDJSON, "the body holds more than one index definition")
	}
	return def, nil
}

func (s *Server) handleCreateIndex(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	def, err := readJSON(s, w, r, parseIndexDefinition, "application/json")
	if err != nil {
		return err
	}
	if err := s.store.CreateIndex(r.Context(), def); err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, map[string]string{"created": def.Name})
}

func (s *Server) handleDropIndex(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	name := r.PathValue("name")
	if err := s.store.DropIndex(r.Context(), name); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]string{"dropped": name})
}

// searchReply is the body of GET /indexes/{name}/search. A hit's fields
// are an object: RETURN's order is the client's to keep.
type searchReply struct {
	Total      int64       `json:"total"`
	Hits       []searchHit `json:"hits"`
	NextCursor string      `json:"nextCursor,omitempty"`
}

type searchHit struct {
	Email  string            `json:"email"`
	Fields map[string]string `json:"fields,omitempty"`
}

func (s *Server) handleSearch(w http.ResponseWriter, r *http.Request, q url.Values) error {
	opts, err := searchOptions(q)
	if err != nil {
		return err
	}
	res, err := s.store.Search(r.Context(), r.PathValue("name"), opts)
	if err != nil {
		return err
	}
	reply := searchReply{Total: res.Total, Hits: make([]searchHit, len(res.Hits)), NextCursor: res.NextCursor}
	for i, h := range res.Hits {
		reply.Hits[i].Email = h.Email
		if !opts.NoContent {
			reply.Hits[i].Fields = make(map[string]string, len(h.Fields))
			for _, f := range h.Fields {
				reply.Hits[i].Fields[f.Name] = f.Value
			}
		}
	}
	return writeJSON(w, http.StatusOK, reply)
}

// searchOptions reads a search's query parameters.
func searchOptions(q url.Values) (partmap.SearchOptions, error) {
	var opts partmap.SearchOptions
	var err error
	if opts.Query, err = oneParam(q, "query", true); err != nil {
		return opts, err
	}
	if opts.SortBy, err = oneParam(q, "sortBy", false); err != nil {
		return opts, err
	}
	switch order, err := oneParam(q, "order", false); {
	case err != nil:
		return opts, err
	case order == "desc":
		opts.Descending = true
	case order != "" && order != "asc":
		return opts, partmap.Errorf(partmap.EINVALID, "order must be asc or desc, not %q", order)
	case order != "" && opts.SortBy == "":
		return opts, partmap.Errorf(partmap.EINVALID, "order needs sortBy")
	}
	for name, dst := range map[string]*int{"limit": &opts.Limit, "offset": &opts.Offset} {
		v, err := oneParam(q, name, false)
		if err != nil {
			return opts, err
		}
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || (name == "limit" && n > partmap.MaxSearchLimit) {
			return opts, partmap.Errorf(partmap.EINVALID, "%s must be an integer from 0 to %d, not %q", name, partmap.MaxSearchLimit, v)
		}
		if name == "limit" && n == 0 {
			n = -1 // only the total
		}
		*dst = n
	}
	if opts.Cursor, err = oneParam(q, "cursor", false); err != nil {
		return opts, err
	}
	if opts.Cursor != "" && opts.Offset != 0 {
		return opts, partmap.Errorf(partmap.EINVALID, "a cursor takes the place of offset; give one or the other")
	}
	if ret, err := oneParam(q, "return", false); err != nil {
		return opts, err
	} else if ret != "" {
		opts.Return = strings.Split(ret, ",")
	}
	switch v, err := oneParam(q, "noContent", false); {
	case err != nil:
		return opts, err
	case v == "true":
		opts.NoContent = true
	case v != "" && v != "false":
		return opts, partmap.Errorf(partmap.EINVALID, "noContent must be true or false, not %q", v)
	}
	if opts.NoContent && opts.Return != nil {
		return opts, partmap.Errorf(partmap.EINVALID, "noContent and return cannot go together")
	}
	return opts, nil
}

func (c *Client) CreateIndex(ctx context.Context, def partmap.IndexDefinition) error {
	body, err := json.Marshal(def)
	if err != nil {
		return err
	}
	_, err = c.do(ctx, request{method: "POST", path: "/indexes", body: body, contentType: "application/json"}, nil)
	return err
}

func (c *Client) DropIndex(ctx context.Context, name string) error {
	_, err := c.do(ctx, request{method: "DELETE", path: "/indexes/" + url.PathEscape(name)}, nil)
	return err
}

func (c *Client) ListIndexes(ctx context.Context) ([]partmap.IndexInfo, error) {
	var out indexesReply
	if _, err := c.do(ctx, request{method: "GET", path: "/indexes"}, &out); err != nil {
		return nil, err
	}
	return out.Indexes, nil
}

func (c *Client) Search(ctx context.Context, index string, opts partmap.SearchOptions) (partmap.SearchResult, error) {
	q := url.Values{"query": {opts.Query}}
	if opts.SortBy != "" {
		q.Set("sortBy", opts.SortBy)
		if opts.Descending {
			q.Set("order", "desc")
		}
	}
	switch {
	case opts.Limit < 0:
		q.Set("limit", "0")
	case opts.Limit > 0:
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Offset != 0 {
		q.Set("offset", strconv.Itoa(opts.Offset))
	}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	if opts.Return != nil {
		for _, f := range opts.Return {
			if f == "" || strings.Contains(f, ",") {
				return partmap.SearchResult{}, partmap.Errorf(partmap.EINVALID, "RETURN field %q: the HTTP route takes field names without commas", f)
			}
		}
		q.Set("return", strings.Join(opts.Return, ","))
	}
	if opts.NoContent {
		q.Set("noContent", "true")
	}
	var out searchReply
	if _, err := c.do(ctx, request{method: "GET", path: "/indexes/" + url.PathEscape(index) + "/search", query: q}, &out); err != nil {
		return partmap.SearchResult{}, err
	}
	res := partmap.SearchResult{Total: out.Total, NextCursor: out.NextCursor, Hits: make([]partmap.SearchHit, len(out.Hits))}
	for i, h := range out.Hits {
		res.Hits[i].Email = h.Email
		if opts.NoContent {
			continue
		}
		names := opts.Return
		if names == nil {
			names = make([]string, 0, len(h.Fields))
			for f := range h.Fields {
				names = append(names, f)
			}
			slices.Sort(names)
		}
		res.Hits[i].Fields = []partmap.FieldValue{}
		for _, f := range names {
			if v, ok := h.Fields[f]; ok {
				res.Hits[i].Fields = append(res.Hits[i].Fields, partmap.FieldValue{Name: f, Value: v})
			}
		}
	}
	return res, nil
}
