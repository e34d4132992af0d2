package model

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/partmap/partmap"
)

// Entry is one profile as the last write left it, with its deadlines
// (Unix ms): the ones that have passed since are still in it, as they are
// in a store that has not swept yet. Live says what a reader sees.
type Entry struct {
	Profile   partmap.Profile
	Deadlines partmap.Deadlines
	// Version is the one the store gave the last write. The model does not
	// draw versions; it only says when one must change (Live).
	Version partmap.Version
}

// Live is the entry as it reads at now (Unix ms): without the fields whose
// deadline is at or before now, and ok false when the profile's own has
// passed. Its Version is the store's own rule (partmap.Record.Live): the
// written one, mixed with each passed deadline, so that the test can hold
// a store to the exact version whether it has swept or not.
func (e Entry) Live(now int64) (live Entry, ok bool) {
	if e.Profile == nil {
		return Entry{}, false
	}
	rec, ok := partmap.Record{Profile: e.Profile, Version: e.Version, Deadlines: e.Deadlines}.Live(now)
	if !ok {
		return Entry{}, false // its deadline, or its last field's, has passed
	}
	live = Entry{Profile: e.Profile.Clone(), Deadlines: partmap.Deadlines{Profile: e.Deadlines.Profile}, Version: e.Version}
	for f, at := range e.Deadlines.Fields {
		if at <= now {
			delete(live.Profile, f)
			continue
		}
		if live.Deadlines.Fields == nil {
			live.Deadlines.Fields = map[string]int64{}
		}
		live.Deadlines.Fields[f] = at
	}
	live.Version = rec.Version
	return live, true
}

// ExpiryState is the profiles of a few emails, with deadlines, by
// canonical email.
type ExpiryState map[string]Entry

// LiveAt returns the profiles a reader sees at now.
func (s ExpiryState) LiveAt(now int64) map[string]Entry {
	out := map[string]Entry{}
	for e, entry := range s {
		if l, ok := entry.Live(now); ok {
			out[e] = l
		}
	}
	return out
}

// ExpiryResult is what an operation (partmap.Operation, through
// Store.Apply) answers, in the model's terms.
type ExpiryResult struct {
	Code           partmap.Code
	Created        bool
	Added, Deleted int
	Value          int64
	Codes          []int
	Values         []*string
	Set            bool
	// Profile is the profile after the operation, nil when there is none
	// (a delete, an expire that deleted it, a setIfAbsent that created
	// nothing).
	Profile partmap.Profile
	// Writes says the operation writes and so gives the profile a new
	// version; otherwise it keeps the one a reader saw.
	Writes bool
}

// Same compares two results, versions aside.
func (r ExpiryResult) Same(o ExpiryResult) bool {
	return r.Code == o.Code && r.Created == o.Created && r.Added == o.Added && r.Deleted == o.Deleted &&
		r.Value == o.Value && slices.Equal(r.Codes, o.Codes) && r.Set == o.Set && Equal(r.Profile, o.Profile) &&
		slices.EqualFunc(r.Values, o.Values, func(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) })
}

func (r ExpiryResult) String() string {
	if r.Code != "" {
		return string(r.Code)
	}
	var vals []string
	for _, v := range r.Values {
		if v == nil {
			vals = append(vals, "nil")
		} else {
			vals = append(vals, strconv.Quote(*v))
		}
	}
	return fmt.Sprintf("created=%v +%d -%d value=%d codes=%v values=%v set=%v profile=%s",
		r.Created, r.Added, r.Deleted, r.Value, r.Codes, vals, r.Set, Describe(r.Profile))
}

// FromOperation reads a store's answer in the model's terms.
func FromOperation(res partmap.OperationResult, err error) ExpiryResult {
	if err != nil {
		return ExpiryResult{Code: partmap.ErrorCode(err)}
	}
	r := ExpiryResult{Created: res.Created, Added: res.FieldsAdded, Deleted: res.FieldsDeleted, Value: res.Value,
		Codes: res.Codes, Values: res.Values, Set: res.Set}
	if res.Record != nil {
		r.Profile = res.Record.Profile
	}
	return r
}

// ApplyOp runs op, with canonical emails (a put's in its profile), at now
// (Unix ms), and returns the next state and the answer. It never changes
// s. Bad input that the store refuses before it looks at the profile
// (EINVALID, EKEYFIELD in the operation's plan) is the caller's to avoid,
// except the key-field cases listed in DESIGN.md, which it answers.
func (s ExpiryState) ApplyOp(op partmap.Operation, now int64) (ExpiryState, ExpiryResult) {
	if err := keyFieldUse(op); err != "" {
		return s, ExpiryResult{Code: err}
	}
	if (op.Op == partmap.OpRename || op.Op == partmap.OpCopy) && op.To == op.Email {
		return s, ExpiryResult{Code: partmap.EINVALID}
	}
	email := op.Email
	if op.Op == partmap.OpPut {
		email = op.Profile.Email()
	}
	cur, exists := s[email].Live(now)
	var next Entry
	r := ExpiryResult{Writes: true}
	switch op.Op {
	case partmap.OpPut:
		next = Entry{Profile: op.Profile.Clone()}
		r.Created = !exists
		return s.with(email, next, r)
	case partmap.OpSetIfAbsent, partmap.OpSetFields:
		return s.setFields(email, cur, exists, op, now)
	}
	if !exists {
		return s, ExpiryResult{Code: partmap.ENOTFOUND}
	}
	next = Entry{Profile: cur.Profile.Clone(), Deadlines: cur.Deadlines.Clone()}
	if next.Deadlines.Fields == nil {
		next.Deadlines.Fields = map[string]int64{}
	}
	switch op.Op {
	case partmap.OpDelete:
		return s.with(email, Entry{}, ExpiryResult{Writes: true})
	case partmap.OpRename, partmap.OpCopy:
		if _, taken := s[op.To].Live(now); taken && !op.Replace {
			return s, ExpiryResult{Code: partmap.EEXISTS}
		}
		next.Profile[partmap.FieldEmail] = op.To
		out := maps.Clone(s)
		if op.Op == partmap.OpRename {
			delete(out, email)
		}
		out[op.To] = next
		return out, ExpiryResult{Writes: true, Profile: next.Profile}
	case partmap.OpPatch:
		for f, v := range op.Patch {
			if f == partmap.FieldEmail {
				continue
			}
			_, had := next.Profile[f]
			switch {
			case v == nil && had:
				delete(next.Profile, f)
				r.Deleted++
			case v != nil:
				if !had {
					r.Added++
				}
				next.Profile[f] = *v
			}
			delete(next.Deadlines.Fields, f) // as HSET and HDEL
		}
	case partmap.OpIncrement:
		stored, present := cur.Profile[op.Field]
		n, err := partmap.AddInteger(op.Field, stored, present, op.By)
		if err != nil {
			return s, ExpiryResult{Code: partmap.ErrorCode(err)}
		}
		next.Profile[op.Field] = strconv.FormatInt(n, 10)
		r.Value = n
		// HINCRBY writes even when it adds 0, and keeps the deadline.
		return s.with(email, next, r)
	case partmap.OpExpire:
		at := resolve(op.When, now)
		if len(op.Fields) == 0 {
			switch {
			case !op.ExpireCond.Allows(cur.Deadlines.Profile, at):
				r.Codes = []int{partmap.ExpiryNotMet}
			case at <= now:
				return s.with(email, Entry{}, ExpiryResult{Writes: true, Codes: []int{partmap.ExpiryDeleted}})
			default:
				next.Deadlines.Profile = at
				r.Codes = []int{partmap.ExpirySet}
			}
			break
		}
		for _, f := range op.Fields {
			_, has := cur.Profile[f]
			switch {
			case !has:
				r.Codes = append(r.Codes, partmap.ExpiryNoField)
			case !op.ExpireCond.Allows(cur.Deadlines.Fields[f], at):
				r.Codes = append(r.Codes, partmap.ExpiryNotMet)
			case at <= now:
				delete(next.Profile, f)
				delete(next.Deadlines.Fields, f)
				r.Codes = append(r.Codes, partmap.ExpiryDeleted)
			default:
				next.Deadlines.Fields[f] = at
				r.Codes = append(r.Codes, partmap.ExpirySet)
			}
		}
	case partmap.OpPersist:
		if len(op.Fields) == 0 {
			r.Codes = []int{partmap.ExpiryNone}
			if cur.Deadlines.Profile != 0 {
				next.Deadlines.Profile = 0
				r.Codes[0] = partmap.ExpirySet
			}
			break
		}
		for _, f := range op.Fields {
			_, has := cur.Profile[f]
			_, expires := cur.Deadlines.Fields[f]
			switch {
			case !has:
				r.Codes = append(r.Codes, partmap.ExpiryNoField)
			case !expires:
				r.Codes = append(r.Codes, partmap.ExpiryNone)
			default:
				delete(next.Deadlines.Fields, f)
				r.Codes = append(r.Codes, partmap.ExpirySet)
			}
		}
	case partmap.OpGetDelete:
		r.Values = values(cur.Profile, op.Fields)
		for _, f := range op.Fields {
			delete(next.Profile, f)
			delete(next.Deadlines.Fields, f)
		}
	case partmap.OpGetExpire:
		r.Values = values(cur.Profile, op.Fields)
		for _, f := range op.Fields {
			if _, has := cur.Profile[f]; !has {
				continue
			}
			switch {
			case op.Expiry.Persist:
				delete(next.Deadlines.Fields, f)
			case op.Expiry.When == nil:
			case resolve(*op.Expiry.When, now) <= now:
				delete(next.Profile, f)
				delete(next.Deadlines.Fields, f)
			default:
				next.Deadlines.Fields[f] = resolve(*op.Expiry.When, now)
			}
		}
	default:
		panic(fmt.Sprintf("model: no expiry model for %q", op.Op))
	}
	return s.unlessSame(op.Op, email, cur, next, r)
}

// keyFieldUse is the EKEYFIELD of an operation that would expire or
// delete emailAddress, which the store refuses before it reads anything.
func keyFieldUse(op partmap.Operation) partmap.Code {
	names := slices.Contains(op.Fields, partmap.FieldEmail)
	switch op.Op {
	case partmap.OpExpire, partmap.OpGetDelete:
		if names {
			return partmap.EKEYFIELD
		}
	case partmap.OpGetExpire:
		if names && op.Expiry.When != nil {
			return partmap.EKEYFIELD
		}
	case partmap.OpSetFields:
		if v, ok := op.Set[partmap.FieldEmail]; ok {
			if c, err := partmap.CanonicalEmail(*v); err != nil || c != op.Email || op.Expiry.When != nil {
				return partmap.EKEYFIELD
			}
		}
	case partmap.OpPatch:
		if v, ok := op.Patch[partmap.FieldEmail]; ok {
			if v == nil {
				return partmap.EKEYFIELD
			}
			if c, err := partmap.CanonicalEmail(*v); err != nil || c != op.Email {
				return partmap.EKEYFIELD
			}
		}
	case partmap.OpIncrement:
		if op.Field == partmap.FieldEmail {
			return partmap.EKEYFIELD
		}
	}
	return ""
}

// setFields is HSETNX and HSETEX, which create a missing profile.
func (s ExpiryState) setFields(email string, cur Entry, exists bool, op partmap.Operation, now int64) (ExpiryState, ExpiryResult) {
	base := cur
	if !exists {
		base = Entry{Profile: partmap.Profile{partmap.FieldEmail: email}}
	}
	set := op.Set
	if op.Op == partmap.OpSetIfAbsent {
		v := op.Value
		set = partmap.Patch{op.Field: &v}
	}
	some, all := false, exists
	for f := range set {
		_, has := base.Profile[f]
		some, all = some || has, all && has
	}
	if op.Op == partmap.OpSetIfAbsent && some || op.FieldSet == partmap.SetIfNoFieldExist && some || op.FieldSet == partmap.SetIfAllExist && !all {
		r := ExpiryResult{}
		if exists {
			r.Profile = cur.Profile
		}
		return s, r
	}
	next := Entry{Profile: base.Profile.Clone(), Deadlines: base.Deadlines.Clone()}
	if next.Deadlines.Fields == nil {
		next.Deadlines.Fields = map[string]int64{}
	}
	added := 0 // HSET's count: fields there after that were not before
	for f, v := range set {
		if f == partmap.FieldEmail {
			if !exists {
				added++ // named, on the profile it creates
			}
			continue // restated, as a patch may: it stays canonical
		}
		_, had := base.Profile[f]
		next.Profile[f] = *v
		switch w := op.Expiry.When; {
		case op.Expiry.KeepTTL:
		case w != nil && resolve(*w, now) <= now:
			delete(next.Profile, f)
			delete(next.Deadlines.Fields, f)
			continue // set and gone: not added
		case w != nil:
			next.Deadlines.Fields[f] = resolve(*w, now)
		default:
			delete(next.Deadlines.Fields, f)
		}
		if !had {
			added++
		}
	}
	r := ExpiryResult{Set: true, Created: !exists, Added: added}
	if !exists && op.Expiry.When != nil && resolve(*op.Expiry.When, now) <= now {
		return s, ExpiryResult{Set: true} // every field gone at once: no profile of the email alone
	}
	if !exists {
		return s.with(email, next, ExpiryResult{Set: true, Created: true, Writes: true, Added: added})
	}
	return s.unlessSame(op.Op, email, cur, next, r)
}

// unlessSame stores next, unless it is cur again: an operation that
// changes nothing writes nothing and keeps the version (DESIGN.md). One of
// Redis's field operations that takes the last field but emailAddress
// deletes the profile, as Redis deletes a hash it empties; a patch does
// not.
func (s ExpiryState) unlessSame(kind partmap.OpKind, email string, cur, next Entry, r ExpiryResult) (ExpiryState, ExpiryResult) {
	if kind != partmap.OpPatch && len(cur.Profile) > 1 && len(next.Profile) == 1 {
		r.Writes = true
		return s.with(email, Entry{}, r)
	}
	if len(next.Deadlines.Fields) == 0 {
		next.Deadlines.Fields = nil
	}
	if Equal(cur.Profile, next.Profile) && cur.Deadlines.Profile == next.Deadlines.Profile &&
		maps.Equal(cur.Deadlines.Fields, next.Deadlines.Fields) {
		r.Writes, r.Profile = false, cur.Profile
		return s, r
	}
	r.Writes = true
	return s.with(email, next, r)
}

// with stores next (a zero Entry: none) under email, as r's write.
func (s ExpiryState) with(email string, next Entry, r ExpiryResult) (ExpiryState, ExpiryResult) {
	out := maps.Clone(s)
	if next.Profile == nil {
		delete(out, email)
		return out, r
	}
	if len(next.Deadlines.Fields) == 0 {
		next.Deadlines.Fields = nil
	}
	out[email] = next
	r.Profile = next.Profile
	return out, r
}

func values(p partmap.Profile, fields []string) []*string {
	out := make([]*string, len(fields))
	for i, f := range fields {
		if v, ok := p[f]; ok {
			out[i] = &v
		}
	}
	return out
}

// resolve is w at now; the model is only given times within bounds.
func resolve(w partmap.When, now int64) int64 {
	if w.Relative {
		return now + w.Millis
	}
	return w.Millis
}

// TTLs is what Store.Deadlines answers for email's fields at now, and
// false when the profile does not exist.
func (s ExpiryState) TTLs(email string, fields []string, now int64) (partmap.TTLs, bool) {
	cur, ok := s[email].Live(now)
	if !ok {
		return partmap.TTLs{}, false
	}
	out := partmap.TTLs{Profile: partmap.ExpiryNone, Now: now, Version: cur.Version, Deadlines: make([]int64, len(fields))}
	if cur.Deadlines.Profile != 0 {
		out.Profile = cur.Deadlines.Profile
	}
	for i, f := range fields {
		_, has := cur.Profile[f]
		switch at := cur.Deadlines.Fields[f]; {
		case !has:
			out.Deadlines[i] = partmap.ExpiryNoField
		case at == 0:
			out.Deadlines[i] = partmap.ExpiryNone
		default:
			out.Deadlines[i] = at
		}
	}
	return out, true
}

// SetVersion records the version the store gave email's last write.
func (s ExpiryState) SetVersion(email string, v partmap.Version) {
	if e, ok := s[email]; ok {
		e.Version = v
		s[email] = e
	}
}
