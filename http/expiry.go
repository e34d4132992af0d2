package http

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/partmap/partmap"
)

// Expiry and the rest of Redis's hash commands (DESIGN.md, "Expiry"): a
// route each, which parses its query and body, runs one operation through
// Store.Apply, and writes what it did. The transaction route takes the
// same operations with the same member names (transaction.go).

// timeParams are the four ways to give a deadline, as HEXPIRE, HPEXPIRE,
// HEXPIREAT and HPEXPIREAT take it. The routes take them as query
// parameters and a transaction's operations as members, by these names.
var timeParams = []struct {
	name              string
	seconds, relative bool
}{
	{"seconds", true, true},
	{"milliseconds", false, true},
	{"at", true, false},
	{"atMilliseconds", false, false},
}

// timeNames lists timeParams' names for messages.
const timeNames = "seconds, milliseconds, at or atMilliseconds"

// parseWhen reads the value of the time parameter name: a whole number,
// never negative, within partmap.MaxDeadline once in milliseconds.
func parseWhen(name, text string) (partmap.When, error) {
	for _, p := range timeParams {
		if p.name != name {
			continue
		}
		n, err := strconv.ParseInt(text, 10, 64)
		if errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(text, "-") {
			return partmap.When{}, &partmap.Error{Code: partmap.EINVALID, Field: name,
				Message: fmt.Sprintf("%s %s is past the latest deadline partmap keeps (%d ms after the epoch)", name, text, int64(partmap.MaxDeadline))}
		}
		if err != nil {
			return partmap.When{}, &partmap.Error{Code: partmap.EINVALID, Field: name,
				Message: fmt.Sprintf("%s must be a whole number, not %q", name, text)}
		}
		return partmap.WhenFromParam(name, n, p.seconds, p.relative)
	}
	return partmap.When{}, fmt.Errorf("http: %q is not a time parameter", name)
}

// whenOf reads the one time that get gives (a query's parameters, a
// transaction operation's members): nil when it gives none, and an error
// naming the second when it gives two.
func whenOf(get func(name string) (string, bool, error)) (*partmap.When, error) {
	var when *partmap.When
	var first string
	for _, p := range timeParams {
		text, ok, err := get(p.name)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if when != nil {
			return nil, &partmap.Error{Code: partmap.EINVALID, Field: p.name,
				Message: fmt.Sprintf("give one time: %s and %s are both given", first, p.name)}
		}
		w, err := parseWhen(p.name, text)
		if err != nil {
			return nil, err
		}
		when, first = &w, p.name
	}
	return when, nil
}

// whenParam reads a query's time parameter, nil when it has none.
func whenParam(q url.Values) (*partmap.When, error) {
	return whenOf(func(name string) (string, bool, error) {
		_, ok := q[name]
		v, err := namedParam(q, name)
		return v, ok, err
	})
}

// namedParam is oneParam, optional, with errors that name the parameter.
func namedParam(q url.Values, name string) (string, error) {
	v, err := oneParam(q, name, false)
	if err != nil {
		return "", &partmap.Error{Code: partmap.EINVALID, Field: name, Message: partmap.ErrorMessage(err)}
	}
	return v, nil
}

// boolParam reads a parameter that is true or false, false when absent.
func boolParam(q url.Values, name string) (bool, error) {
	v, err := namedParam(q, name)
	if err != nil || v == "" {
		return false, err
	}
	b, err := strconv.ParseBool(v)
	if err != nil || (v != "true" && v != "false") {
		return false, &partmap.Error{Code: partmap.EINVALID, Field: name, Message: fmt.Sprintf("%s is true or false, not %q", name, v)}
	}
	return b, nil
}

// requiredFields reads a field list that an operation needs.
func requiredFields(q url.Values) ([]string, error) {
	fields, err := fieldsParam(q)
	if err == nil && fields == nil {
		err = &partmap.Error{Code: partmap.EINVALID, Field: "fields", Message: "name the fields: fields=a,b or field=NAME, repeated"}
	}
	return fields, err
}

// parseFieldSetCondition reads setFields' FNX or FXX, in any case, or "".
func parseFieldSetCondition(s string) (partmap.FieldSetCondition, error) {
	switch c := partmap.FieldSetCondition(strings.ToUpper(s)); c {
	case partmap.SetFieldsAlways, partmap.SetIfNoFieldExist, partmap.SetIfAllExist:
		return c, nil
	}
	return "", &partmap.Error{Code: partmap.EINVALID, Field: "condition", Message: fmt.Sprintf("condition %q is not FNX or FXX", s)}
}

// parseSet reads the fields to set, a JSON object of strings. setIfAbsent
// sets exactly one.
func parseSet(body []byte, one bool) (partmap.Patch, error) {
	set, err := partmap.ParsePatchJSON(body)
	if err != nil {
		return nil, err
	}
	if one && len(set) != 1 {
		return nil, partmap.Errorf(partmap.EINVALID, "set-if-absent sets one field, as {\"name\":\"value\"}, not %d; set several with set-fields?condition=FNX", len(set))
	}
	for name, v := range set {
		if v == nil {
			return nil, &partmap.Error{Code: partmap.EINVALID, Field: name,
				Message: fmt.Sprintf("field %q is null; these routes set values (delete fields with get-delete or a PATCH)", name)}
		}
	}
	return set, nil
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

// opReply is the body of the reply of the routes below: the canonical
// email, the profile as the operation left it (none once it is gone), and
// the members of the operation's own answer.
type opReply struct {
	Email   string              `json:"emailAddress"`
	Field   string              `json:"field,omitempty"`   // setIfAbsent
	Results []codeResult        `json:"results,omitempty"` // expire, persist
	Values  *partmap.Projection `json:"values,omitempty"`  // getDelete, getExpire
	Set     *bool               `json:"set,omitempty"`     // setIfAbsent, setFields
	// FieldsAdded counts the fields setFields added, like HSET's reply.
	FieldsAdded *int            `json:"fieldsAdded,omitempty"`
	Profile     partmap.Profile `json:"profile,omitempty"`
}

// apply runs op under the request's If-Match and If-None-Match and writes
// its reply: 201 with a Location when it created the profile, else 200,
// and the ETag whenever a profile results.
func (s *Server) apply(w http.ResponseWriter, r *http.Request, op partmap.Operation) error {
	var err error
	if op.Cond, err = condition(r); err != nil {
		return err
	}
	res, err := s.store.Apply(r.Context(), op)
	if err != nil {
		return err
	}
	reply := opReply{Email: res.Email, Values: valuesOf(op, res)}
	switch op.Op {
	case partmap.OpExpire, partmap.OpPersist:
		reply.Results = codeResults(op, res.Codes)
	case partmap.OpSetIfAbsent:
		reply.Field, reply.Set = op.Field, &res.Set
	case partmap.OpSetFields:
		reply.Set, reply.FieldsAdded = &res.Set, &res.FieldsAdded
	}
	status := http.StatusOK
	if res.Record != nil {
		w.Header().Set("ETag", res.Record.Version.ETag())
		reply.Profile = res.Record.Profile
	}
	if res.Created {
		status = http.StatusCreated
		w.Header().Set("Location", profileLocation(res.Email))
	}
	return writeJSON(w, status, reply)
}

func (s *Server) handleExpire(w http.ResponseWriter, r *http.Request, q url.Values) error {
	email, err := emailParam(q)
	if err != nil {
		return err
	}
	fields, err := fieldsParam(q)
	if err != nil {
		return err
	}
	when, err := whenParam(q)
	if err != nil {
		return err
	}
	if when == nil {
		return &partmap.Error{Code: partmap.EINVALID, Field: "seconds", Message: "give the deadline: one of " + timeNames}
	}
	c, err := namedParam(q, "condition")
	if err != nil {
		return err
	}
	cond, err := partmap.ParseExpireCondition(c)
	if err != nil {
		return err
	}
	return s.apply(w, r, partmap.Operation{Op: partmap.OpExpire, Email: email, Fields: fields, When: *when, ExpireCond: cond})
}

func (s *Server) handlePersist(w http.ResponseWriter, r *http.Request, q url.Values) error {
	email, err := emailParam(q)
	if err != nil {
		return err
	}
	fields, err := fieldsParam(q)
	if err != nil {
		return err
	}
	return s.apply(w, r, partmap.Operation{Op: partmap.OpPersist, Email: email, Fields: fields})
}

func (s *Server) handleSetIfAbsent(w http.ResponseWriter, r *http.Request, q url.Values) error {
	email, err := emailParam(q)
	if err != nil {
		return err
	}
	body, err := s.readBody(w, r, "application/json")
	if err != nil {
		return err
	}
	set, err := parseSet(body, true)
	if err != nil {
		return err
	}
	op := partmap.Operation{Op: partmap.OpSetIfAbsent, Email: email}
	for op.Field = range set {
		op.Value = *set[op.Field]
	}
	return s.apply(w, r, op)
}

func (s *Server) handleGetDelete(w http.ResponseWriter, r *http.Request, q url.Values) error {
	email, err := emailParam(q)
	if err != nil {
		return err
	}
	fields, err := requiredFields(q)
	if err != nil {
		return err
	}
	return s.apply(w, r, partmap.Operation{Op: partmap.OpGetDelete, Email: email, Fields: fields})
}

func (s *Server) handleGetExpire(w http.ResponseWriter, r *http.Request, q url.Values) error {
	email, err := emailParam(q)
	if err != nil {
		return err
	}
	fields, err := requiredFields(q)
	if err != nil {
		return err
	}
	when, err := whenParam(q)
	if err != nil {
		return err
	}
	persist, err := boolParam(q, "persist")
	if err != nil {
		return err
	}
	if persist && when != nil {
		return &partmap.Error{Code: partmap.EINVALID, Field: "persist", Message: "give a time or persist=true, not both"}
	}
	return s.apply(w, r, partmap.Operation{Op: partmap.OpGetExpire, Email: email, Fields: fields,
		Expiry: partmap.FieldExpiry{When: when, Persist: persist}})
}

func (s *Server) handleSetFields(w http.ResponseWriter, r *http.Request, q url.Values) error {
	email, err := emailParam(q)
	if err != nil {
		return err
	}
	c, err := namedParam(q, "condition")
	if err != nil {
		return err
	}
	cond, err := parseFieldSetCondition(c)
	if err != nil {
		return err
	}
	when, err := whenParam(q)
	if err != nil {
		return err
	}
	keep, err := boolParam(q, "keepTTL")
	if err != nil {
		return err
	}
	if keep && when != nil {
		return &partmap.Error{Code: partmap.EINVALID, Field: "keepTTL", Message: "give a time or keepTTL=true, not both"}
	}
	body, err := s.readBody(w, r, "application/json")
	if err != nil {
		return err
	}
	set, err := parseSet(body, false)
	if err != nil {
		return err
	}
	return s.apply(w, r, partmap.Operation{Op: partmap.OpSetFields, Email: email, Set: set, FieldSet: cond,
		Expiry: partmap.FieldExpiry{When: when, KeepTTL: keep}})
}

// incrementFloat serves the increment route with float=true: by is a
// decimal, added as HINCRBYFLOAT adds it. A bad by is refused before the
// store is asked, with an error that names it.
func (s *Server) incrementFloat(w http.ResponseWriter, r *http.Request, op partmap.Operation) error {
	if err := partmap.ParseFloatIncrement(op.ByFloat); err != nil {
		return &partmap.Error{Code: partmap.ErrorCode(err), Field: "by", Message: "by: " + partmap.ErrorMessage(err)}
	}
	res, err := s.store.Apply(r.Context(), op)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", res.Record.Version.ETag())
	return writeJSON(w, http.StatusOK, incrementReply{res.Email, op.Field, res.FloatValue})
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
	email, err := emailParam(q)
	if err != nil {
		return err
	}
	fields, err := fieldsParam(q)
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
	// The ETag is the profile's: a deadline changes only with a new
	// version, so a 304 says that no deadline has moved (the times to
	// live have, with the clock).
	nm, err := notModified(r, ttls.Version)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", ttls.Version.ETag())
	if nm {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	reply := ttlReply{Email: canonical, Now: ttls.Now, Profile: entryOf(ttls, "", ttls.Profile), Fields: make([]ttlEntry, len(fields))}
	for i, f := range fields {
		reply.Fields[i] = entryOf(ttls, f, ttls.Deadlines[i])
	}
	return writeJSON(w, http.StatusOK, reply)
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

// Apply runs op on its route: put, patch, increment, delete and rename on
// theirs, incrementFloat on the increment route, and the others on theirs
// below. The increment route sends no profile, so an increment's Record
// carries its version only. A get, and an increment or delete with the
// Redis flags (Create, AllowMissing), which have no route of their own,
// go as a transaction of one operation.
func (c *Client) Apply(ctx context.Context, op partmap.Operation) (partmap.OperationResult, error) {
	// Refused here as the server would: a member a route cannot carry
	// must not be dropped on the way.
	if err := op.CheckMembers(); err != nil {
		return partmap.OperationResult{}, err
	}
	if op.Op == partmap.OpGet || op.Create || op.AllowMissing {
		results, err := c.Transact(ctx, []partmap.Operation{op})
		if err != nil {
			return partmap.OperationResult{}, untagged(err)
		}
		return results[0], nil
	}
	res := partmap.OperationResult{Op: op.Op, Email: op.Email}
	switch op.Op {
	case partmap.OpPut:
		rec, created, err := c.UpsertProfile(ctx, op.Profile, op.Cond)
		if err != nil {
			return partmap.OperationResult{}, err
		}
		res.Email, res.Record, res.Created = rec.Profile.Email(), &rec, created
		return res, nil
	case partmap.OpPatch:
		pr, err := c.PatchProfile(ctx, op.Email, op.Patch, op.Cond)
		if err != nil {
			return partmap.OperationResult{}, err
		}
		res.Email, res.Record = pr.Record.Profile.Email(), &pr.Record
		res.FieldsAdded, res.FieldsDeleted = pr.FieldsAdded, pr.FieldsDeleted
		return res, nil
	case partmap.OpIncrement:
		inc, err := c.IncrementField(ctx, op.Email, op.Field, op.By, op.Cond)
		if err != nil {
			return partmap.OperationResult{}, err
		}
		res.Email, res.Value, res.Record = inc.Email, inc.Value, &partmap.Record{Version: inc.Version}
		return res, nil
	case partmap.OpDelete:
		if err := c.DeleteProfile(ctx, op.Email, op.Cond); err != nil {
			return partmap.OperationResult{}, err
		}
		res.Email, _ = partmap.CanonicalEmail(op.Email)
		return res, nil
	case partmap.OpRename:
		rec, err := c.RenameProfile(ctx, op.Email, op.To, op.Cond)
		if err != nil {
			return partmap.OperationResult{}, err
		}
		res.Email, res.Record = rec.Profile.Email(), &rec
		return res, nil
	case partmap.OpIncrementFloat:
		return c.incrementFloat(ctx, op)
	}
	req, err := opRequest(op)
	if err != nil {
		return partmap.OperationResult{}, err
	}
	var reply opReply
	resp, err := c.do(ctx, req, &reply)
	if err != nil {
		return partmap.OperationResult{}, err
	}
	res.Email, res.Created = reply.Email, resp.StatusCode == http.StatusCreated
	for _, r := range reply.Results {
		res.Codes = append(res.Codes, r.Code)
	}
	res.Values = valuesIn(op, reply.Values)
	if reply.FieldsAdded != nil {
		res.FieldsAdded = *reply.FieldsAdded
	}
	if reply.Set != nil {
		res.Set = *reply.Set
	}
	if reply.Profile != nil {
		v, err := etagOf(resp)
		if err != nil {
			return partmap.OperationResult{}, err
		}
		res.Record = &partmap.Record{Profile: reply.Profile, Version: v}
	}
	return res, nil
}

// opRequest is the request of op's own route.
func opRequest(op partmap.Operation) (request, error) {
	q := emailValues(op.Email)
	if len(op.Fields) > 0 {
		q["field"] = op.Fields // repeated, for names with commas
	}
	setWhen := func(w *partmap.When) {
		switch {
		case w == nil:
		case w.Relative:
			q.Set("milliseconds", strconv.FormatInt(w.Millis, 10))
		default:
			q.Set("atMilliseconds", strconv.FormatInt(w.Millis, 10))
		}
	}
	req := request{method: "POST", query: q, cond: op.Cond}
	var err error
	switch op.Op {
	case partmap.OpExpire:
		req.path = "/customer-profile/expire"
		setWhen(&op.When)
		if op.ExpireCond != partmap.ExpireAlways {
			q.Set("condition", string(op.ExpireCond))
		}
	case partmap.OpPersist:
		req.path = "/customer-profile/persist"
	case partmap.OpSetIfAbsent:
		req.path = "/customer-profile/set-if-absent"
		v := op.Value
		req.body, err = partmap.Patch{op.Field: &v}.MarshalJSON()
	case partmap.OpGetDelete:
		req.path = "/customer-profile/get-delete"
	case partmap.OpGetExpire:
		req.path = "/customer-profile/get-expire"
		setWhen(op.Expiry.When)
		if op.Expiry.Persist {
			q.Set("persist", "true")
		}
	case partmap.OpSetFields:
		req.path = "/customer-profile/set-fields"
		setWhen(op.Expiry.When)
		if op.Expiry.KeepTTL {
			q.Set("keepTTL", "true")
		}
		if op.FieldSet != partmap.SetFieldsAlways {
			q.Set("condition", string(op.FieldSet))
		}
		req.body, err = op.Set.MarshalJSON()
	default:
		err = partmap.Errorf(partmap.EINVALID, "unknown operation %q", op.Op)
	}
	return req, err
}

// incrementFloat asks the increment route with float=true.
func (c *Client) incrementFloat(ctx context.Context, op partmap.Operation) (partmap.OperationResult, error) {
	q := emailValues(op.Email)
	q.Set("field", op.Field)
	q.Set("by", op.ByFloat)
	q.Set("float", "true")
	var out incrementReply
	resp, err := c.do(ctx, request{method: "POST", path: "/customer-profile/increment", query: q, cond: op.Cond}, &out)
	if err != nil {
		return partmap.OperationResult{}, err
	}
	v, err := etagOf(resp)
	if err != nil {
		return partmap.OperationResult{}, err
	}
	return partmap.OperationResult{Op: op.Op, Email: out.Email, FloatValue: out.Value, Record: &partmap.Record{Version: v}}, nil
}

// expiryMembers reads the members of the operations of expiry.go into
// op; operation has checked which are present.
func (w txOp) expiryMembers(op *partmap.Operation) error {
	if w.Fields != nil {
		op.Fields = *w.Fields
	}
	when, err := whenOf(func(name string) (string, bool, error) {
		raw := w.times()[name]
		return string(raw), raw != nil, nil
	})
	if err != nil {
		return err
	}
	switch w.Op {
	case partmap.OpExpire:
		op.When = *when
		op.ExpireCond, err = partmap.ParseExpireCondition(w.Condition)
	case partmap.OpIncrementFloat:
		text := string(w.By)
		if unq, err := strconv.Unquote(text); err == nil {
			text = unq
		}
		op.ByFloat = text
		if err := partmap.ParseFloatIncrement(text); err != nil {
			return &partmap.Error{Code: partmap.ErrorCode(err), Field: "by", Message: "by: " + partmap.ErrorMessage(err)}
		}
	case partmap.OpSetIfAbsent, partmap.OpSetFields:
		var set partmap.Patch
		if set, err = parseSet(w.Set, w.Op == partmap.OpSetIfAbsent); err != nil {
			return err
		}
		if w.Op == partmap.OpSetIfAbsent {
			for op.Field = range set {
				op.Value = *set[op.Field]
			}
			return nil
		}
		op.Set = set
		op.FieldSet, err = parseFieldSetCondition(w.Condition)
		op.Expiry = partmap.FieldExpiry{When: when, KeepTTL: w.KeepTTL != nil && *w.KeepTTL}
	case partmap.OpGetExpire:
		op.Expiry = partmap.FieldExpiry{When: when, Persist: w.Persist != nil && *w.Persist}
		if op.Expiry.Persist && when != nil {
			return &partmap.Error{Code: partmap.EINVALID, Field: "persist", Message: "give a time or persist, not both"}
		}
	}
	return err
}

// setExpiryMembers writes op's members of the operations of expiry.go.
func (w *txOp) setExpiryMembers(op partmap.Operation) error {
	if op.Fields != nil {
		w.Fields = &op.Fields
	}
	setWhen := func(when *partmap.When) {
		switch {
		case when == nil:
		case when.Relative:
			w.Milliseconds = json.RawMessage(strconv.FormatInt(when.Millis, 10))
		default:
			w.AtMilliseconds = json.RawMessage(strconv.FormatInt(when.Millis, 10))
		}
	}
	var err error
	switch op.Op {
	case partmap.OpExpire:
		setWhen(&op.When)
		w.Condition = string(op.ExpireCond)
	case partmap.OpIncrementFloat:
		w.By = json.RawMessage(strconv.Quote(op.ByFloat))
	case partmap.OpSetIfAbsent:
		v := op.Value
		w.Set, err = partmap.Patch{op.Field: &v}.MarshalJSON()
		w.Field = ""
	case partmap.OpGetExpire:
		setWhen(op.Expiry.When)
		if op.Expiry.Persist {
			w.Persist = &op.Expiry.Persist
		}
	case partmap.OpSetFields:
		setWhen(op.Expiry.When)
		w.Condition = string(op.FieldSet)
		if op.Expiry.KeepTTL {
			w.KeepTTL = &op.Expiry.KeepTTL
		}
		w.Set, err = op.Set.MarshalJSON()
	}
	return err
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
