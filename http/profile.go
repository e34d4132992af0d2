package http

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"

	"github.com/partmap/partmap"
)

func (s *Server) handleGetProfile(w http.ResponseWriter, r *http.Request, q url.Values) error {
	email, fields, err := emailAndFields(q)
	if err != nil {
		return err
	}
	var version partmap.Version
	var body any
	if fields == nil {
		rec, err := s.store.FindProfile(r.Context(), email)
		version, body = rec.Version, rec.Profile
		if err != nil {
			return err
		}
	} else {
		proj, err := s.store.ProjectProfile(r.Context(), email, fields)
		version, body = proj.Version, proj
		if err != nil {
			return err
		}
	}
	return writeRead(w, r, version, body)
}

func (c *Client) FindProfile(ctx context.Context, email string) (partmap.Record, error) {
	var rec partmap.Record
	resp, err := c.do(ctx, request{method: "GET", path: "/customer-profile", query: emailValues(email)}, &rec.Profile)
	if err != nil {
		return partmap.Record{}, err
	}
	rec.Version, err = etagOf(resp)
	return rec, err
}

func (c *Client) ProjectProfile(ctx context.Context, email string, fields []string) (partmap.Projection, error) {
	if len(fields) == 0 {
		return partmap.Projection{}, partmap.Errorf(partmap.EINVALID, "name at least one field")
	}
	// field=NAME, repeated, carries any name, commas included.
	q := emailValues(email)
	q["field"] = fields
	var proj partmap.Projection
	resp, err := c.do(ctx, request{method: "GET", path: "/customer-profile", query: q}, &proj)
	if err != nil {
		return partmap.Projection{}, err
	}
	proj.Version, err = etagOf(resp)
	return proj, err
}

func (s *Server) handlePutProfile(w http.ResponseWriter, r *http.Request, q url.Values) error {
	cond, err := condition(r)
	if err != nil {
		return err
	}
	profile, err := readJSON(s, w, r, partmap.ParseProfileJSON, "application/json")
	if err != nil {
		return err
	}
	// A PUT may name its profile in the URL too (its Location); then the
	// two must agree, or the write would land somewhere unexpected.
	if _, named := q["emailAddress"]; named {
		if err := sameEmail(q, profile); err != nil {
			return err
		}
	}
	rec, created, err := partmap.UpsertProfile(r.Context(), s.writes, profile, cond)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", rec.Version.ETag())
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", profileLocation(rec.Profile.Email()))
	}
	return writeJSON(w, status, rec.Profile)
}

func sameEmail(q url.Values, profile partmap.Profile) error {
	inURL, err := emailParam(q)
	if err != nil {
		return err
	}
	a, errA := partmap.CanonicalEmail(inURL)
	b, errB := partmap.CanonicalEmail(profile[partmap.FieldEmail])
	if errA != nil {
		return errA
	}
	if errB == nil && a != b {
		return &partmap.Error{Code: partmap.EKEYFIELD, Field: partmap.FieldEmail,
			Message: fmt.Sprintf("the URL names %s but the body's emailAddress is %s", a, b)}
	}
	return nil
}

// put sends a put on PUT customer-profile, naming the email in the URL
// too when op does, so that the server checks that the two agree.
func (c *Client) put(ctx context.Context, op partmap.Operation) (partmap.OperationResult, error) {
	body, err := json.Marshal(op.Profile)
	if err != nil {
		return partmap.OperationResult{}, err
	}
	var q url.Values
	if op.Email != "" {
		q = emailValues(op.Email)
	}
	rec := partmap.Record{}
	resp, err := c.do(ctx, request{method: "PUT", path: "/customer-profile", query: q, body: body, cond: op.Cond}, &rec.Profile)
	if err != nil {
		return partmap.OperationResult{}, err
	}
	rec.Version, err = etagOf(resp)
	return partmap.OperationResult{Op: op.Op, Email: rec.Profile.Email(), Record: &rec, Created: resp.StatusCode == http.StatusCreated}, err
}

// patchReply is the body of a PATCH reply.
type patchReply struct {
	Profile       partmap.Profile `json:"profile"`
	FieldsAdded   int             `json:"fieldsAdded"`
	FieldsDeleted int             `json:"fieldsDeleted"`
}

func (s *Server) handlePatchProfile(w http.ResponseWriter, r *http.Request, q url.Values) error {
	email, cond, err := emailAndCondition(r, q)
	if err != nil {
		return err
	}
	patch, err := readJSON(s, w, r, partmap.ParsePatchJSON, "application/merge-patch+json", "application/json")
	if err != nil {
		return err
	}
	res, err := partmap.PatchProfile(r.Context(), s.writes, email, patch, cond)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", res.Record.Version.ETag())
	return writeJSON(w, http.StatusOK, patchReply{res.Record.Profile, res.FieldsAdded, res.FieldsDeleted})
}

func (c *Client) patch(ctx context.Context, op partmap.Operation) (partmap.OperationResult, error) {
	body, err := json.Marshal(op.Patch)
	if err != nil {
		return partmap.OperationResult{}, err
	}
	var out patchReply
	resp, err := c.do(ctx, request{method: "PATCH", path: "/customer-profile", query: emailValues(op.Email),
		body: body, contentType: "application/merge-patch+json", cond: op.Cond}, &out)
	if err != nil {
		return partmap.OperationResult{}, err
	}
	v, err := etagOf(resp)
	return partmap.OperationResult{Op: op.Op, Email: out.Profile.Email(), Record: &partmap.Record{Profile: out.Profile, Version: v},
		FieldsAdded: out.FieldsAdded, FieldsDeleted: out.FieldsDeleted}, err
}

func (s *Server) handleDeleteProfile(w http.ResponseWriter, r *http.Request, q url.Values) error {
	email, cond, err := emailAndCondition(r, q)
	if err != nil {
		return err
	}
	if err := partmap.DeleteProfile(r.Context(), s.writes, email, cond); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (c *Client) delete(ctx context.Context, op partmap.Operation) (partmap.OperationResult, error) {
	if _, err := c.do(ctx, request{method: "DELETE", path: "/customer-profile", query: emailValues(op.Email), cond: op.Cond}, nil); err != nil {
		return partmap.OperationResult{}, err
	}
	email, _ := partmap.CanonicalEmail(op.Email) // the server took it
	return partmap.OperationResult{Op: op.Op, Email: email, Deleted: true}, nil
}

// incrementReply is the body of an increment reply. The value is a decimal
// string, as stored, because JSON numbers lose precision past 2^53. The
// profile is the one the increment left, as a PUT's and a PATCH's replies
// hold theirs, so that the Go client's Apply answers it as every store's
// does.
type incrementReply struct {
	Email   string          `json:"emailAddress"`
	Field   string          `json:"field"`
	Value   string          `json:"value"`
	Profile partmap.Profile `json:"profile"`
}

func (s *Server) handleIncrement(w http.ResponseWriter, r *http.Request, q url.Values) error {
	email, cond, err := emailAndCondition(r, q)
	if err != nil {
		return err
	}
	field, err := oneParam(q, "field", true)
	if err != nil {
		return err
	}
	float, err := boolParam(q, "float")
	if err != nil {
		return err
	}
	v, err := oneParam(q, "by", false)
	if err != nil {
		return err
	}
	op := partmap.Operation{Op: partmap.OpIncrement, Email: email, Field: field, By: 1}
	switch {
	case float:
		// HINCRBYFLOAT's by, read as a transaction's: a bad one is refused
		// before the store is asked, naming it.
		m := partmap.OperationJSON{Op: partmap.OpIncrementFloat, Email: email, Field: field}
		if err := m.SetText("by", cmp.Or(v, "1")); err != nil {
			return err
		}
		if op, err = m.Operation(); err != nil {
			return err
		}
	case v != "":
		if op.By, err = strconv.ParseInt(v, 10, 64); err != nil {
			return &partmap.Error{Code: partmap.EINVALID, Field: "by",
				Message: fmt.Sprintf("by must be an integer from %d to %d, not %q; add float=true to add a decimal", math.MinInt64, math.MaxInt64, v)}
		}
	}
	op.Cond = cond
	res, err := s.writes.Apply(r.Context(), op)
	if err != nil {
		return err
	}
	value := res.FloatValue
	if !float {
		value = strconv.FormatInt(res.Value, 10)
	}
	w.Header().Set("ETag", res.Record.Version.ETag())
	return writeJSON(w, http.StatusOK, incrementReply{res.Email, op.Field, value, res.Record.Profile})
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

// increment sends an increment on its route, which answers the value and
// the version, not the profile.
func (c *Client) increment(ctx context.Context, op partmap.Operation) (partmap.OperationResult, error) {
	q := emailValues(op.Email)
	q.Set("field", op.Field)
	q.Set("by", strconv.FormatInt(op.By, 10))
	var out incrementReply
	resp, err := c.do(ctx, request{method: "POST", path: "/customer-profile/increment", query: q, cond: op.Cond}, &out)
	if err != nil {
		return partmap.OperationResult{}, err
	}
	res := partmap.OperationResult{Op: op.Op, Email: out.Email, Record: &partmap.Record{Profile: out.Profile}}
	if res.Value, err = strconv.ParseInt(out.Value, 10, 64); err != nil {
		return partmap.OperationResult{}, fmt.Errorf("server sent a bad counter value %q", out.Value)
	}
	res.Record.Version, err = etagOf(resp)
	return res, err
}

func emailValues(email string) url.Values { return url.Values{"emailAddress": {email}} }

func etagOf(resp *http.Response) (partmap.Version, error) {
	v, err := partmap.ParseETag(resp.Header.Get("ETag"))
	if err != nil {
		return 0, fmt.Errorf("server sent a bad ETag: %w", err)
	}
	return v, nil
}
