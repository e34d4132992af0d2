package http

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/partmap/partmap"
)

// Expiry and the rest of Redis's hash commands (DESIGN.md, "Expiry"): a
// route each, whose query parameters and body are the members of one
// operation, which partmap.OperationJSON reads as it reads a transaction's
// (transaction.go); the route runs it through Store.Apply and answers as a
// transaction does.

// operationRoute serves the route of one operation of kind. Its query
// parameters are the operation's members, each as its text (fields also
// as field=NAME, repeated), and set is the body; the route's list of
// parameters has refused any other.
func (s *Server) operationRoute(kind partmap.OpKind) handler {
	return func(w http.ResponseWriter, r *http.Request, q url.Values) error {
		email, fields, err := emailAndFields(q)
		if err != nil {
			return err
		}
		m := partmap.OperationJSON{Op: kind, Email: email}
		if fields != nil {
			m.Fields = &fields
		}
		for _, name := range slices.Sorted(maps.Keys(q)) {
			if name == "emailAddress" || name == "fields" || name == "field" {
				continue
			}
			v, err := namedParam(q, name)
			if err == nil {
				err = m.SetText(name, v)
			}
			if err != nil {
				return err
			}
		}
		if takes, _ := kind.Takes("set"); takes {
			if m.Set, err = s.readBody(w, r, "application/json"); err != nil {
				return err
			}
		}
		op, err := m.Operation()
		if err != nil {
			return err
		}
		return s.apply(w, r, op)
	}
}

// namedParam is oneParam, optional, with errors that name the parameter.
func namedParam(q url.Values, name string) (string, error) {
	v, err := oneParam(q, name, false)
	if err != nil {
		return "", &partmap.Error{Code: partmap.EINVALID, Field: name, Message: partmap.ErrorMessage(err)}
	}
	return v, nil
}

// codeResult is one code of an expire or persist: a field's, or, without
// a field, the profile's own.
type codeResult struct {
	Field string `json:"field,omitempty"`
	Code  int    `json:"code"`
}

func codeResults(op partmap.Operation, codes []int) []codeResult {
	out := make([]codeResult, len(codes))
	for i, code := range codes {
		out[i].Code = code
		if i < len(op.Fields) {
			out[i].Field = op.Fields[i]
		}
	}
	return out
}

// valuesOf is what a getDelete or getExpire read, as a projection: the
// fields in the order asked, null for a missing one.
func valuesOf(op partmap.Operation, res partmap.OperationResult) *partmap.Projection {
	if op.Op != partmap.OpGetDelete && op.Op != partmap.OpGetExpire {
		return nil
	}
	return &partmap.Projection{Fields: op.Fields, Values: res.Values}
}

// valuesIn reads them back in op's order.
func valuesIn(op partmap.Operation, p *partmap.Projection) []*string {
	if p == nil {
		return nil
	}
	byName := make(map[string]*string, len(p.Fields))
	for i, f := range p.Fields {
		byName[f] = p.Values[i]
	}
	out := make([]*string, len(op.Fields))
	for i, f := range op.Fields {
		out[i] = byName[f]
	}
	return out
}

// apply runs op under the request's If-Match and If-None-Match and answers
// as a transaction answers it (wireResult): its status, and its ETag and
// Location as headers.
func (s *Server) apply(w http.ResponseWriter, r *http.Request, op partmap.Operation) error {
	var err error
	if op.Cond, err = condition(r); err != nil {
		return err
	}
	res, err := s.writes.Apply(r.Context(), op)
	if err != nil {
		return err
	}
	reply := wireResult(op, res)
	if reply.ETag != "" {
		w.Header().Set("ETag", reply.ETag)
	}
	if reply.Location != "" {
		w.Header().Set("Location", reply.Location)
	}
	reply.ETag, reply.Location = "", ""
	return writeJSON(w, reply.Status, reply.opReply)
}

// ttlReply is the body of GET customer-profile/ttl: the server's clock,
// and the deadlines of the profile and of the fields asked, in that
// order.
type ttlReply struct {
	Email   string     `json:"emailAddress"`
	Now     int64      `json:"now"`
	Profile ttlEntry   `json:"profile"`
	Fields  []ttlEntry `json:"fields"`
}

// ttlEntry is a deadline in Unix ms and its time to live from now, or,
// without them, Redis's code: -2 no such field, -1 no deadline.
type ttlEntry struct {
	Field    string `json:"field,omitempty"`
	Code     int    `json:"code,omitempty"`
	Deadline *int64 `json:"deadline,omitempty"`
	TTL      *int64 `json:"ttl,omitempty"`
}

func entryOf(ttls partmap.TTLs, field string, deadline int64) ttlEntry {
	e := ttlEntry{Field: field}
	if deadline < 0 {
		e.Code = int(deadline)
		return e
	}
	ttl := ttls.TTL(deadline)
	e.Deadline, e.TTL = &deadline, &ttl
	return e
}

func (e ttlEntry) deadline() int64 {
	if e.Deadline != nil {
		return *e.Deadline
	}
	return int64(e.Code)
}

func (s *Server) handleTTL(w http.ResponseWriter, r *http.Request, q url.Values) error {
	email, fields, err := emailAndFields(q)
	if err == nil {
		err = partmap.FieldsOnce(fields)
	}
	if err != nil {
		return err
	}
	ttls, err := s.store.Deadlines(r.Context(), email, fields)
	if err != nil {
		return err
	}
	canonical, err := partmap.CanonicalEmail(email)
	if err != nil {
		return err
	}
	reply := ttlReply{Email: canonical, Now: ttls.Now, Profile: entryOf(ttls, "", ttls.Profile), Fields: make([]ttlEntry, len(fields))}
	for i, f := range fields {
		reply.Fields[i] = entryOf(ttls, f, ttls.Deadlines[i])
	}
	// The ETag is the profile's: a deadline changes only with a new
	// version, so a 304 says that no deadline has moved (the times to
	// live have, with the clock).
	return writeRead(w, r, ttls.Version, reply)
}

// Deadlines asks GET customer-profile/ttl.
func (c *Client) Deadlines(ctx context.Context, email string, fields []string) (partmap.TTLs, error) {
	q := emailValues(email)
	if len(fields) > 0 {
		q["field"] = fields // repeated, for names with commas
	}
	var reply ttlReply
	resp, err := c.do(ctx, request{method: "GET", path: "/customer-profile/ttl", query: q}, &reply)
	if err != nil {
		return partmap.TTLs{}, err
	}
	if len(reply.Fields) != len(fields) {
		return partmap.TTLs{}, fmt.Errorf("GET /customer-profile/ttl: %d deadlines for %d fields", len(reply.Fields), len(fields))
	}
	ttls := partmap.TTLs{Profile: reply.Profile.deadline(), Deadlines: make([]int64, len(fields)), Now: reply.Now}
	for i, e := range reply.Fields {
		ttls.Deadlines[i] = e.deadline()
	}
	ttls.Version, err = etagOf(resp)
	return ttls, err
}

// Apply sends a put, patch, increment, delete or rename on its own route,
// and any other operation, or one with the Redis flags (Create,
// AllowMissing, Replace) that those routes lack, as a transaction of one operation;
// the expiry family's own routes are their route tests'. An increment's
// route answers no profile: its Record carries the version only.
func (c *Client) Apply(ctx context.Context, op partmap.Operation) (partmap.OperationResult, error) {
	// Refused here as the server would: a member the JSON form cannot
	// carry must not be dropped on the way.
	if err := op.CheckMembers(); err != nil {
		return partmap.OperationResult{}, err
	}
	op.FailAlone = false // one operation fails alone anyway, as the store's Apply takes it
	switch {
	case op.Op == partmap.OpPut:
		return c.put(ctx, op)
	case op.Op == partmap.OpPatch:
		return c.patch(ctx, op)
	case op.Op == partmap.OpIncrement && !op.Create:
		return c.increment(ctx, op)
	case op.Op == partmap.OpDelete && !op.AllowMissing:
		return c.delete(ctx, op)
	case op.Op == partmap.OpRename && !op.Replace:
		return c.rename(ctx, op)
	}
	results, err := c.Transact(ctx, []partmap.Operation{op})
	if err != nil {
		return partmap.OperationResult{}, untagged(err)
	}
	return results[0], nil
}

// untagged strips a transaction's tag from the error of a transaction of
// one operation, so that Apply's errors name no operation, as the store's.
func untagged(err error) error {
	var e *partmap.Error
	if !errors.As(err, &e) || e.Operation != 1 {
		return err
	}
	plain := *e
	plain.Operation = 0
	if rest, ok := strings.CutPrefix(plain.Message, "operation 1 ("); ok {
		if _, msg, ok := strings.Cut(rest, "): "); ok {
			plain.Message = msg
		}
	} else if msg, ok := strings.CutPrefix(plain.Message, "operation 1: "); ok {
		plain.Message = msg
	}
	return &plain
}
