package directory

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/partmap/partmap"
)

func (d *Directory) ProjectProfile(ctx context.Context, email string, fields []string) (partmap.Projection, error) {
	if err := checkFieldList(fields); err != nil {
		return partmap.Projection{}, err
	}
	rec, err := d.FindProfile(ctx, email)
	if err != nil {
		return partmap.Projection{}, err
	}
	return project(rec, fields), nil
}

// project returns the named fields of rec, in order, nil for a missing one.
func project(rec partmap.Record, fields []string) partmap.Projection {
	out := partmap.Projection{Fields: fields, Values: make([]*string, len(fields)), Version: rec.Version}
	for i, f := range fields {
		if v, ok := rec.Profile[f]; ok {
			out.Values[i] = &v
		}
	}
	return out
}

// checkFieldNames checks the fields of an operation that takes them in
// turn, as Redis takes a field named twice: at least one, none empty.
func checkFieldNames(fields []string) error {
	if len(fields) == 0 {
		return partmap.Errorf(partmap.EINVALID, "name at least one field")
	}
	if slices.Contains(fields, "") {
		return partmap.Errorf(partmap.EINVALID, "a field name in the list is empty")
	}
	return nil
}

// checkFieldList checks a projection's fields: checkFieldNames', and none
// twice.
func checkFieldList(fields []string) error {
	if err := checkFieldNames(fields); err != nil || len(fields) == 1 {
		return err // HGET's, every time: no set to build
	}
	seen := make(map[string]struct{}, len(fields))
	for _, f := range fields {
		if _, dup := seen[f]; dup {
			return &partmap.Error{Code: partmap.EINVALID, Field: f, Message: fmt.Sprintf("field %q is named twice", f)}
		}
		seen[f] = struct{}{}
	}
	return nil
}

// checkPatch checks a patch's names and values against the limits.
func (d *Directory) checkPatch(patch partmap.Patch) error {
	for name, v := range patch {
		value := ""
		if v != nil {
			value = *v
		}
		if err := d.limits.CheckField(name, value); err != nil {
			return err
		}
	}
	return nil
}

// patched applies patch to cur, the profile of email, and counts the
// fields it adds and deletes, as HSET and HDEL would. A patch that
// changes nothing returns a nil profile: the record keeps its version.
func patched(email string, cur partmap.Profile, patch partmap.Patch) (next partmap.Profile, added, deleted int, err error) {
	if err := checkKeyField(email, patch); err != nil {
		return nil, 0, 0, err
	}
	next = cur.Clone()
	changed := false
	for name, v := range patch {
		if name == partmap.FieldEmail {
			continue // restated, as checkKeyField made sure
		}
		old, had := next[name]
		switch {
		case v == nil && had:
			delete(next, name)
			deleted++
		case v != nil && !had:
			added++
		case v == nil || old == *v:
			continue
		}
		if v != nil {
			next[name] = *v
		}
		changed = true
	}
	if !changed {
		return nil, added, deleted, nil
	}
	return next, added, deleted, nil
}

// checkKeyField allows a patch to mention emailAddress only to restate it.
func checkKeyField(email string, patch partmap.Patch) error {
	v, ok := patch[partmap.FieldEmail]
	if !ok {
		return nil
	}
	if v == nil {
		return &partmap.Error{Code: partmap.EKEYFIELD, Field: partmap.FieldEmail,
			Message: "emailAddress is the profile's key and cannot be deleted; delete the profile instead"}
	}
	if canonical, err := partmap.CanonicalEmail(*v); err != nil || canonical != email {
		return &partmap.Error{Code: partmap.EKEYFIELD, Field: partmap.FieldEmail,
			Message: "emailAddress is the profile's key and cannot be changed; create a profile under the new address"}
	}
	return nil
}

// checkCounter checks that field can be incremented.
func (d *Directory) checkCounter(field string) error {
	if field == partmap.FieldEmail {
		return &partmap.Error{Code: partmap.EKEYFIELD, Field: field, Message: "emailAddress is the profile's key, not a counter"}
	}
	return d.limits.CheckField(field, "")
}

// incremented adds by to field of cur, as HINCRBY: a missing field counts
// from 0.
func incremented(cur partmap.Profile, field string, by int64) (partmap.Profile, int64, error) {
	stored, present := cur[field]
	n, err := partmap.AddInteger(field, stored, present, by)
	if err != nil {
		return nil, 0, err
	}
	next := cur.Clone()
	next[field] = strconv.FormatInt(n, 10)
	return next, n, nil
}
