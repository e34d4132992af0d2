package http

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

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
// key is a mistake, not something to ignore, and invalid UTF-8, which the
// decoder would quietly replace, is refused.
func parseIndexDefinition(body []byte) (partmap.IndexDefinition, error) {
	var def partmap.IndexDefinition
	if !utf8.Valid(body) {
		return def, partmap.Errorf(partmap.EINVALIDUTF8, "the index definition is not valid UTF-8")
	}
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
// are an object, as a profile is: RETURN's order is the client's to keep.
// nextCursor is null on the last page, as a listing's is.
type searchReply struct {
	Total      int64       `json:"total"`
	Hits       []searchHit `json:"hits"`
	NextCursor *string     `json:"nextCursor"`
}

// searchHit is one hit: its fields are there unless noContent asked for
// none, and empty when RETURN names none that the profile holds.
type searchHit struct {
	Email  string            `json:"emailAddress"`
	Fields map[string]string `json:"fields,omitzero"`
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
	reply := searchReply{Total: res.Total, Hits: make([]searchHit, len(res.Hits))}
	if res.NextCursor != "" {
		reply.NextCursor = &res.NextCursor
	}
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

// searchOptions reads a search's query parameters. What only the index
// can judge (the query, sortBy's field, how deep offset may go) is the
// store's to refuse.
func searchOptions(q url.Values) (partmap.SearchOptions, error) {
	var opts partmap.SearchOptions
	var err error
	if opts.Query, err = namedParam(q, "query"); err != nil {
		return opts, err
	}
	if !q.Has("query") {
		return opts, &partmap.Error{Code: partmap.EINVALID, Field: "query", Message: "the query parameter is required; query=* matches every profile"}
	}
	if opts.SortBy, err = namedParam(q, "sortBy"); err != nil {
		return opts, err
	}
	switch order, err := namedParam(q, "order"); {
	case err != nil:
		return opts, err
	case order != "" && order != "asc" && order != "desc":
		return opts, &partmap.Error{Code: partmap.EINVALID, Field: "order", Message: fmt.Sprintf("order must be asc or desc, not %q", order)}
	case order != "" && opts.SortBy == "":
		return opts, &partmap.Error{Code: partmap.EINVALID, Field: "order", Message: "order needs sortBy: without it, hits come in the index's own order"}
	default:
		opts.Descending = order == "desc"
	}
	if v, err := namedParam(q, "limit"); err != nil {
		return opts, err
	} else if v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > partmap.MaxSearchLimit {
			return opts, &partmap.Error{Code: partmap.EINVALID, Field: "limit",
				Message: fmt.Sprintf("limit must be an integer from 0 to %d, not %q", partmap.MaxSearchLimit, v)}
		}
		opts.Limit = n
		if n == 0 {
			opts.Limit = -1 // only the total, as LIMIT 0 0
		}
	}
	if v, err := namedParam(q, "offset"); err != nil {
		return opts, err
	} else if v != "" {
		if opts.Offset, err = strconv.Atoi(v); err != nil || opts.Offset < 0 {
			return opts, &partmap.Error{Code: partmap.EINVALID, Field: "offset", Message: fmt.Sprintf("offset must be an integer of 0 or more, not %q", v)}
		}
	}
	if opts.Cursor, err = namedParam(q, "cursor"); err != nil {
		return opts, err
	}
	if opts.Cursor != "" && opts.Offset != 0 {
		return opts, &partmap.Error{Code: partmap.EINVALID, Field: "cursor", Message: "a cursor takes the place of offset; give one or the other"}
	}
	if ret, err := namedParam(q, "return"); err != nil {
		return opts, err
	} else if q.Has("return") {
		// return= is RETURN 0: emails and an empty object of fields.
		opts.Return = []string{}
		if ret != "" {
			opts.Return = strings.Split(ret, ",")
		}
		for i, f := range opts.Return {
			switch {
			case f == "":
				return opts, &partmap.Error{Code: partmap.EINVALID, Field: "return", Message: fmt.Sprintf("return %q names an empty field", ret)}
			case !utf8.ValidString(f):
				return opts, &partmap.Error{Code: partmap.EINVALIDUTF8, Field: "return", Message: "a field name in return is not valid UTF-8"}
			case slices.Contains(opts.Return[:i], f):
				return opts, &partmap.Error{Code: partmap.EINVALID, Field: "return", Message: fmt.Sprintf("return names %q twice", f)}
			}
		}
	}
	if opts.NoContent, err = boolParam(q, "noContent"); err != nil {
		return opts, err
	}
	if opts.NoContent && opts.Return != nil {
		return opts, &partmap.Error{Code: partmap.EINVALID, Field: "noContent", Message: "noContent and return cannot go together"}
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
		for _, f := range opts.Return { // none is return=, RETURN 0
			switch {
			case f == "":
				return partmap.SearchResult{}, partmap.Errorf(partmap.EINVALID, "RETURN names an empty field")
			case strings.Contains(f, ","):
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
	res := partmap.SearchResult{Total: out.Total, Hits: make([]partmap.SearchHit, len(out.Hits))}
	if out.NextCursor != nil {
		res.NextCursor = *out.NextCursor
	}
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
