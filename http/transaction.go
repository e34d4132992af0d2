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

	"github.com/partmap/partmap"
)

func profileLocation(email string) string {
	return BasePath + "/customer-profile?emailAddress=" + url.QueryEscape(email)
}

func (s *Server) handleRename(w http.ResponseWriter, r *http.Request, q url.Values) error {
	from, cond, err := emailAndCondition(r, q)
	if err != nil {
		return err
	}
	to, err := oneParam(q, "to", true)
	if err != nil {
		return err
	}
	rec, err := partmap.RenameProfile(r.Context(), s.store, from, to, cond)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", rec.Version.ETag())
	w.Header().Set("Location", profileLocation(rec.Profile.Email()))
	return writeJSON(w, http.StatusCreated, rec.Profile)
}

func (c *Client) rename(ctx context.Context, op partmap.Operation) (partmap.OperationResult, error) {
	q := emailValues(op.Email)
	q.Set("to", op.To)
	rec := partmap.Record{}
	resp, err := c.do(ctx, request{method: "POST", path: "/customer-profile/rename", query: q, cond: op.Cond}, &rec.Profile)
	if err != nil {
		return partmap.OperationResult{}, err
	}
	rec.Version, err = etagOf(resp)
	return partmap.OperationResult{Op: op.Op, Email: rec.Profile.Email(), Record: &rec}, err
}

// parseTxOps reads a transaction's operations, strictly: an unknown
// member, or one the operation's kind does not take, is an error that
// names the operation.
func parseTxOps(body []byte) ([]partmap.Operation, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	// The operations stay raw here and are decoded one by one below, so
	// that an error inside one (an unknown member, a member of the wrong
	// type) names it.
	var req struct {
		Operations []json.RawMessage `json:"operations"`
	}
	if err := dec.Decode(&req); err != nil {
		return nil, partmap.Errorf(partmap.EMALFORMEDJSON, "the body must be {\"operations\": [...]}: %v", err)
	}
	if dec.More() {
		return nil, partmap.Errorf(partmap.EMALFORMEDJSON, "the body holds more than one JSON value")
	}
	if len(req.Operations) == 0 || len(req.Operations) > partmap.MaxTransactionOps {
		return nil, partmap.Errorf(partmap.EINVALID, "a transaction takes 1 to %d operations, not %d", partmap.MaxTransactionOps, len(req.Operations))
	}
	ops := make([]partmap.Operation, len(req.Operations))
	for i, raw := range req.Operations {
		op, err := partmap.ParseOperationJSON(raw)
		if err != nil {
			e := partmap.Error{Code: partmap.ErrorCode(err), Message: partmap.ErrorMessage(err), Operation: i + 1}
			e.Message = fmt.Sprintf("operation %d: %s", i+1, e.Message)
			return nil, &e
		}
		ops[i] = op
	}
	return ops, nil
}

// txReply is the body of a transaction's reply: one result per operation,
// each what the single-profile route would have answered: its status, the
// profile's ETag and Location where that route sends them, and its body's
// members.
type txReply struct {
	Results []txResult `json:"results"`
}

type txResult struct {
	Op     partmap.OpKind `json:"op"`
	Status int            `json:"status"`
	opReply
}

// opReply is what an operation answers, the members of a transaction's
// result past its op and status; with neither ETag nor Location, which
// are headers there, it is the body of the reply of a route of one
// operation (Server.apply).
type opReply struct {
	Email         string          `json:"emailAddress"`
	ETag          string          `json:"etag,omitempty"`
	Location      string          `json:"location,omitempty"`
	Profile       partmap.Profile `json:"profile,omitempty"`
	FieldsAdded   *int            `json:"fieldsAdded,omitempty"`
	FieldsDeleted *int            `json:"fieldsDeleted,omitempty"`
	Field         string          `json:"field,omitempty"`
	Value         string          `json:"value,omitempty"`
	// The members of the routes of expiry.go.
	Results []codeResult        `json:"results,omitempty"` // expire, persist
	Values  *partmap.Projection `json:"values,omitempty"`  // getDelete, getExpire
	Set     *bool               `json:"set,omitempty"`     // setIfAbsent, setFields
}

func wireResult(op partmap.Operation, res partmap.OperationResult) txResult {
	w := txResult{Op: res.Op, Status: http.StatusOK, opReply: opReply{Email: res.Email}}
	if res.Record != nil {
		w.ETag, w.Profile = res.Record.Version.ETag(), res.Record.Profile
	}
	switch res.Op {
	case partmap.OpPut:
		if res.Created {
			w.Status, w.Location = http.StatusCreated, profileLocation(res.Email)
		}
	case partmap.OpRename, partmap.OpCopy:
		w.Status, w.Location = http.StatusCreated, profileLocation(res.Email)
	case partmap.OpPatch:
		w.FieldsAdded, w.FieldsDeleted = &res.FieldsAdded, &res.FieldsDeleted
	case partmap.OpIncrement:
		w.Field, w.Value = op.Field, strconv.FormatInt(res.Value, 10)
		if res.Created {
			w.Status, w.Location = http.StatusCreated, profileLocation(res.Email)
		}
	case partmap.OpDelete:
		w.Status = http.StatusNoContent
		if !res.Deleted {
			w.Status = http.StatusNotFound // allowMissing, and nothing to delete
		}
	case partmap.OpGet:
		if res.Record == nil {
			w.Status = http.StatusNotFound
		}
		if len(op.Fields) > 0 {
			// A projection is a JSON object: a field asked twice is sent
			// once, and the client answers it twice (valuesIn).
			w.Values, w.Profile = &partmap.Projection{}, nil
			for i, f := range op.Fields {
				if !slices.Contains(w.Values.Fields, f) {
					w.Values.Fields, w.Values.Values = append(w.Values.Fields, f), append(w.Values.Values, res.Values[i])
				}
			}
		}
	case partmap.OpExpire, partmap.OpPersist:
		w.Results = codeResults(op, res.Codes)
	case partmap.OpIncrementFloat:
		w.Field, w.Value = op.Field, res.FloatValue
		if res.Created {
			w.Status, w.Location = http.StatusCreated, profileLocation(res.Email)
		}
	case partmap.OpGetDelete, partmap.OpGetExpire:
		w.Values = valuesOf(op, res)
	case partmap.OpSetIfAbsent, partmap.OpSetFields:
		if op.Op == partmap.OpSetIfAbsent {
			w.Field = op.Field
		}
		w.Set = &res.Set
		if res.Op == partmap.OpSetFields {
			w.FieldsAdded = &res.FieldsAdded
		}
		if res.Created {
			w.Status, w.Location = http.StatusCreated, profileLocation(res.Email)
		}
	}
	return w
}

func (s *Server) handleTransaction(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	ops, err := readJSON(s, w, r, parseTxOps, "application/json")
	if err != nil {
		return err
	}
	results, err := s.store.Transact(r.Context(), ops)
	if err != nil {
		return err
	}
	reply := txReply{Results: make([]txResult, len(results))}
	for i, res := range results {
		reply.Results[i] = wireResult(ops[i], res)
	}
	return writeJSON(w, http.StatusOK, reply)
}

func (c *Client) Transact(ctx context.Context, ops []partmap.Operation) ([]partmap.OperationResult, error) {
	for _, op := range ops {
		if op.FailAlone {
			return nil, &partmap.Error{Code: partmap.EINVALID, Field: "FailAlone", Message: "the transaction route has no failAlone: over HTTP, a transaction is all or nothing"}
		}
	}
	body, err := json.Marshal(struct {
		Operations []partmap.Operation `json:"operations"`
	}{ops})
	if err != nil {
		return nil, err
	}
	var reply txReply
	if _, err := c.do(ctx, request{method: "POST", path: "/transactions", body: body}, &reply); err != nil {
		return nil, err
	}
	if len(reply.Results) != len(ops) {
		return nil, fmt.Errorf("POST /transactions: %d results for %d operations", len(reply.Results), len(ops))
	}
	out := make([]partmap.OperationResult, len(ops))
	for i, w := range reply.Results {
		res := partmap.OperationResult{Op: w.Op, Email: w.Email, Created: w.Status == http.StatusCreated && w.Op != partmap.OpRename && w.Op != partmap.OpCopy,
			Deleted: w.Op == partmap.OpDelete && w.Status == http.StatusNoContent}
		for _, r := range w.Results {
			res.Codes = append(res.Codes, r.Code)
		}
		res.Values = valuesIn(ops[i], w.Values)
		if w.Set != nil {
			res.Set = *w.Set
		}
		if w.Op == partmap.OpIncrementFloat {
			res.FloatValue = w.Value
		}
		if w.FieldsAdded != nil {
			res.FieldsAdded = *w.FieldsAdded
		}
		if w.FieldsDeleted != nil {
			res.FieldsDeleted = *w.FieldsDeleted
		}
		if w.Op == partmap.OpIncrement {
			if res.Value, err = strconv.ParseInt(w.Value, 10, 64); err != nil {
				return nil, fmt.Errorf("POST /transactions: result %d: bad value %q", i+1, w.Value)
			}
		}
		if w.ETag != "" {
			v, err := partmap.ParseETag(w.ETag)
			if err != nil {
				return nil, fmt.Errorf("POST /transactions: result %d: %w", i+1, err)
			}
			res.Record = &partmap.Record{Profile: w.Profile, Version: v}
		}
		out[i] = res
	}
	return out, nil
}

// TransactionResultLines renders a transaction's results as the reply of
// POST /transactions does, one JSON object per result, for `partmap tx`.
func TransactionResultLines(ops []partmap.Operation, results []partmap.OperationResult) ([][]byte, error) {
	lines := make([][]byte, len(results))
	for i, res := range results {
		b, err := json.Marshal(wireResult(ops[i], res))
		if err != nil {
			return nil, err
		}
		lines[i] = b
	}
	return lines, nil
}
