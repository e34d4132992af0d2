package directory

import (
	"context"
	"fmt"
	"maps"

	"github.com/partmap/partmap"
)

// now is the directory's clock in Unix milliseconds, the unit of deadlines.
func (d *Directory) now() int64 { return d.clock().UnixMilli() }

// live is rec as a reader sees it at now (partmap.Record.Live): nil when
// there is no record or its profile has expired.
func live(rec *partmap.Record, now int64) *partmap.Record {
	if rec == nil || rec.Deadlines.IsZero() {
		return rec
	}
	l, ok := rec.Live(now)
	if !ok {
		return nil
	}
	return &l
}

func (d *Directory) Deadlines(ctx context.Context, email string, fields []string) (partmap.TTLs, error) {
	if len(fields) > 0 {
		if err := checkFieldNames(fields); err != nil {
			return partmap.TTLs{}, err
		}
	}
	email, err := d.locate(ctx, email)
	if err != nil {
		return partmap.TTLs{}, err
	}
	// One instant for the record and the clock reported with it, so that
	// no deadline shown is already past.
	var rec *partmap.Record
	var now int64
	err = d.read(func(sv *serving) error {
		stored, err := d.engine.Read(ctx, sv.part(email), email)
		now = d.now()
		if rec = live(stored, now); err == nil && rec == nil {
			err = notFound(email)
		}
		return err
	})
	if err != nil {
		return partmap.TTLs{}, err
	}
	out := partmap.TTLs{Profile: partmap.ExpiryNone, Deadlines: make([]int64, len(fields)), Now: now, Version: rec.Version}
	if at := rec.Deadlines.Profile; at != 0 {
		out.Profile = at
	}
	for i, f := range fields {
		_, has := rec.Profile[f]
		at := rec.Deadlines.Fields[f]
		switch {
		case !has:
			out.Deadlines[i] = partmap.ExpiryNoField
		case at == 0:
			out.Deadlines[i] = partmap.ExpiryNone
		default:
			out.Deadlines[i] = at
		}
	}
	return out, nil
}

// Apply runs one operation. Those of one profile take only its partition,
// through guarded, as any single-profile write does; a rename or copy
// takes both of its partitions, as a transaction.
func (d *Directory) Apply(ctx context.Context, op partmap.Operation) (partmap.OperationResult, error) {
	op, err := d.planOne(op)
	if err != nil {
		return partmap.OperationResult{}, err
	}
	return d.applyPlanned(ctx, op)
}

// applyPlanned runs one planned operation under the lock of its profile
// alone (a rename's or copy's two): over a backend that checks writes, a
// lock in process and none in the store.
func (d *Directory) applyPlanned(ctx context.Context, op partmap.Operation) (partmap.OperationResult, error) {
	if err := d.checkStarted(ctx); err != nil {
		return partmap.OperationResult{}, err
	}
	if op.Op == partmap.OpRename || op.Op == partmap.OpCopy {
		results, _, err := d.transact(ctx, []partmap.Operation{op}, nil)
		if err != nil {
			return partmap.OperationResult{}, err
		}
		return results[0], nil
	}
	var res partmap.OperationResult
	err := d.guarded(ctx, op.Email, op.Cond, func(st staged, cur *partmap.Record, now int64) error {
		return d.applyTo(st, cur, op, &res, now)
	})
	return res, err
}

// applyTo applies op to cur, the live record of st's profile (nil: none),
// at now, with the semantics of its Redis command.
func (d *Directory) applyTo(st staged, cur *partmap.Record, op partmap.Operation, res *partmap.OperationResult, now int64) error {
	*res = partmap.OperationResult{Op: op.Op, Email: op.Email}
	switch op.Op {
	case partmap.OpPut:
		res.Created = cur == nil
		return d.write(st, cur, partmap.Record{Profile: op.Profile}, res)
	case partmap.OpSetIfAbsent, partmap.OpSetFields:
		return d.setFields(st, cur, op, res, now)
	case partmap.OpGet:
		res.Record = cur
		if len(op.Fields) > 0 {
			var p partmap.Profile
			if cur != nil {
				p = cur.Profile
			}
			res.Values = values(p, op.Fields)
		}
		return nil
	case partmap.OpDelete:
		if cur == nil {
			if op.AllowMissing {
				return nil
			}
			return notFound(op.Email)
		}
		res.Deleted = true
		return st.Delete(op.Op)
	}
	base := cur
	if cur == nil {
		if !op.Create {
			return notFound(op.Email)
		}
		// An increment that creates starts from the key alone, as HINCRBY
		// creates its key.
		base, res.Created = &partmap.Record{Profile: partmap.Profile{partmap.FieldEmail: op.Email}}, true
	}
	next := partmap.Record{Profile: base.Profile, Deadlines: base.Deadlines.Clone()}
	changed := true
	var err error
	switch op.Op {
	case partmap.OpPatch:
		next.Profile, res.FieldsAdded, res.FieldsDeleted, err = patched(op.Email, cur.Profile, op.Patch)
		for name := range op.Patch {
			delete(next.Deadlines.Fields, name) // a value written, or deleted, loses its deadline, as with HSET and HDEL
		}
		changed = next.Profile != nil
		for name, v := range op.Patch {
			if _, expires := cur.Deadlines.Fields[name]; expires && v != nil && !changed {
				// Rewriting a value as it is still clears its deadline, as HSET does.
				next.Profile, changed = cur.Profile, true
			}
		}
	case partmap.OpIncrement:
		next.Profile, res.Value, err = incremented(base.Profile, op.Field, op.By)
	case partmap.OpIncrementFloat:
		stored, present := base.Profile[op.Field]
		if res.FloatValue, err = partmap.AddFloat(op.Field, stored, present, op.ByFloat); err == nil {
			next.Profile = base.Profile.Clone()
			next.Profile[op.Field] = res.FloatValue
		}
	case partmap.OpExpire:
		changed, err = expire(&next, op, res, now)
		if err == nil && len(op.Fields) == 0 && res.Codes[0] == partmap.ExpiryDeleted {
			return st.Delete(op.Op) // a time now or past, even the epoch's 0, which is no deadline
		}
	case partmap.OpPersist:
		changed = persist(&next, op, res)
	case partmap.OpGetDelete:
		changed = getDelete(&next, op, res)
	case partmap.OpGetExpire:
		changed, err = getExpire(&next, op, res, now)
	default:
		return fmt.Errorf("directory: no apply for operation %q", op.Op)
	}
	if err != nil {
		return err
	}
	if changed && op.Op != partmap.OpIncrement && op.Op != partmap.OpIncrementFloat && sameRecord(*cur, next) {
		changed = false // a deadline set to the one it had, say: HINCRBY alone always writes
	}
	if !changed {
		res.Record = cur // nothing changes: the version stays
		return nil
	}
	if next.Deadlines.Profile != 0 && next.Deadlines.Profile <= now || emptied(op.Op, cur, next) {
		return st.Delete(op.Op) // EXPIRE with a time now or past, or the last field gone
	}
	return d.write(st, cur, next, res)
}

// emptied reports that next, what op leaves of cur, has lost cur's last
// field but emailAddress. Redis's field operations (HGETDEL, which HDEL
// is too; HEXPIRE, HGETEX and HSETEX with a time now or past) then delete
// the profile, in the same commit, as Redis deletes a hash it empties, and
// as a profile whose last field expires ends (partmap.Record.End). A patch,
// HTTP's PATCH, leaves the key alone, as a put of it alone makes it.
func emptied(op partmap.OpKind, cur *partmap.Record, next partmap.Record) bool {
	return op != partmap.OpPatch && cur != nil && len(cur.Profile) > 1 && len(next.Profile) == 1
}

// write stores next, with a new version, as op's result.
func (d *Directory) write(st staged, cur *partmap.Record, next partmap.Record, res *partmap.OperationResult) error {
	if err := d.limits.CheckProfile(next.Profile); err != nil {
		return err
	}
	if len(next.Deadlines.Fields) == 0 {
		next.Deadlines.Fields = nil
	}
	var prev partmap.Version
	if cur != nil {
		prev = cur.Version
	}
	next.Version = nextVersion(prev)
	res.Record = &next
	return st.Put(next, res.Op)
}

// own makes next's profile its own before it changes.
func own(next *partmap.Record, cur partmap.Profile) {
	next.Profile = cur.Clone()
}

// expire sets a deadline on the profile, as PEXPIREAT, or on fields, as
// HPEXPIREAT: one code each.
func expire(next *partmap.Record, op partmap.Operation, res *partmap.OperationResult, now int64) (bool, error) {
	at, err := op.When.Resolve(now, op.LatestDeadline())
	if err != nil {
		return false, err
	}
	if len(op.Fields) == 0 {
		if !op.ExpireCond.Allows(next.Deadlines.Profile, at) {
			res.Codes = []int{partmap.ExpiryNotMet}
			return false, nil
		}
		next.Deadlines.Profile = at
		res.Codes = []int{partmap.ExpirySet}
		if at <= now {
			res.Codes[0] = partmap.ExpiryDeleted
		}
		return true, nil
	}
	own(next, next.Profile)
	changed := false
	res.Codes = make([]int, len(op.Fields))
	for i, f := range op.Fields {
		if _, has := next.Profile[f]; !has {
			res.Codes[i] = partmap.ExpiryNoField
			continue
		}
		if !op.ExpireCond.Allows(next.Deadlines.Fields[f], at) {
			res.Codes[i] = partmap.ExpiryNotMet
			continue
		}
		changed = true
		if at <= now {
			delete(next.Profile, f)
			delete(next.Deadlines.Fields, f)
			res.Codes[i] = partmap.ExpiryDeleted
			continue
		}
		setDeadline(&next.Deadlines, f, at)
		res.Codes[i] = partmap.ExpirySet
	}
	return changed, nil
}

func setDeadline(d *partmap.Deadlines, field string, at int64) {
	if d.Fields == nil {
		d.Fields = map[string]int64{}
	}
	d.Fields[field] = at
}

// persist removes the profile's deadline, as PERSIST, or the fields', as
// HPERSIST.
func persist(next *partmap.Record, op partmap.Operation, res *partmap.OperationResult) bool {
	if len(op.Fields) == 0 {
		if next.Deadlines.Profile == 0 {
			res.Codes = []int{partmap.ExpiryNone}
			return false
		}
		next.Deadlines.Profile = 0
		res.Codes = []int{partmap.ExpirySet}
		return true
	}
	changed := false
	res.Codes = make([]int, len(op.Fields))
	for i, f := range op.Fields {
		_, has := next.Profile[f]
		_, expires := next.Deadlines.Fields[f]
		switch {
		case !has:
			res.Codes[i] = partmap.ExpiryNoField
		case !expires:
			res.Codes[i] = partmap.ExpiryNone
		default:
			delete(next.Deadlines.Fields, f)
			res.Codes[i] = partmap.ExpirySet
			changed = true
		}
	}
	return changed
}

// values reads fields of p, nil for a missing one.
func values(p partmap.Profile, fields []string) []*string {
	out := make([]*string, len(fields))
	for i, f := range fields {
		if v, ok := p[f]; ok {
			out[i] = &v
		}
	}
	return out
}

// getDelete reads fields and deletes those present, as HGETDEL: a field
// named again is gone.
func getDelete(next *partmap.Record, op partmap.Operation, res *partmap.OperationResult) bool {
	own(next, next.Profile)
	res.Values = make([]*string, len(op.Fields))
	changed := false
	for i, f := range op.Fields {
		if v, ok := next.Profile[f]; ok {
			res.Values[i] = &v
			delete(next.Profile, f)
			delete(next.Deadlines.Fields, f)
			changed = true
		}
	}
	return changed
}

// getExpire reads fields and sets or removes the deadlines of those
// present, as HGETEX; a deadline now or past deletes them.
func getExpire(next *partmap.Record, op partmap.Operation, res *partmap.OperationResult, now int64) (bool, error) {
	res.Values = values(next.Profile, op.Fields)
	if op.Expiry.When == nil && !op.Expiry.Persist {
		return false, nil
	}
	var at int64
	if op.Expiry.When != nil {
		var err error
		if at, err = op.Expiry.When.Resolve(now, op.LatestDeadline()); err != nil {
			return false, err
		}
	}
	own(next, next.Profile)
	changed := false
	for i, f := range op.Fields {
		if _, has := next.Profile[f]; !has {
			res.Values[i] = nil // gone as named before, at a past time
			continue
		}
		_, expires := next.Deadlines.Fields[f]
		switch {
		case op.Expiry.Persist:
			if expires {
				delete(next.Deadlines.Fields, f)
				changed = true
			}
		case at <= now:
			delete(next.Profile, f)
			delete(next.Deadlines.Fields, f)
			changed = true
		default:
			setDeadline(&next.Deadlines, f, at)
			changed = true
		}
	}
	return changed, nil
}

// setFields sets one field if the profile lacks it, as HSETNX, or several
// with conditions and deadlines, as HSETEX; either creates a missing
// profile, as Redis creates a missing key.
func (d *Directory) setFields(st staged, cur *partmap.Record, op partmap.Operation, res *partmap.OperationResult, now int64) error {
	base := partmap.Record{Profile: partmap.Profile{partmap.FieldEmail: op.Email}}
	if cur != nil {
		base = *cur
	}
	set := op.Set
	if op.Op == partmap.OpSetIfAbsent {
		v := op.Value
		set = partmap.Patch{op.Field: &v}
	}
	some, all := false, true
	for f := range set {
		_, has := base.Profile[f]
		some = some || has
		all = all && has && cur != nil
	}
	switch {
	case op.Op == partmap.OpSetIfAbsent && some,
		op.FieldSet == partmap.SetIfNoFieldExist && some,
		op.FieldSet == partmap.SetIfAllExist && !all:
		if cur != nil {
			res.Record = cur
		}
		return nil
	}
	res.Set, res.Created = true, cur == nil
	next := partmap.Record{Profile: base.Profile.Clone(), Deadlines: base.Deadlines.Clone()}
	var at int64
	if w := op.Expiry.When; w != nil {
		var err error
		if at, err = w.Resolve(now, op.LatestDeadline()); err != nil {
			return err
		}
	}
	for f := range set {
		if f == partmap.FieldEmail {
			if cur == nil {
				res.FieldsAdded++ // named, on a profile it creates
			}
			continue // restated, as planExpiry made sure
		}
		_, had := base.Profile[f]
		next.Profile[f] = *set[f]
		switch {
		case op.Expiry.KeepTTL:
		case op.Expiry.When != nil && at <= now:
			delete(next.Profile, f) // set and gone at once, as HSETEX with a past time
			delete(next.Deadlines.Fields, f)
			continue // not added
		case op.Expiry.When != nil:
			setDeadline(&next.Deadlines, f, at)
		default:
			delete(next.Deadlines.Fields, f)
		}
		if !had {
			res.FieldsAdded++ // HSET's reply: fields there after that were not before
		}
	}
	if cur != nil && sameRecord(*cur, next) {
		res.Record = cur // it changes nothing: the version stays
		return nil
	}
	if cur == nil && op.Expiry.When != nil && at <= now {
		// Every field set is gone at once: as Redis leaves no key behind,
		// no profile of the email alone is made.
		res.Created, res.FieldsAdded = false, 0
		return nil
	}
	if emptied(op.Op, cur, next) {
		return st.Delete(op.Op)
	}
	return d.write(st, cur, next, res)
}

// sameRecord reports whether next holds what cur does, deadlines included.
func sameRecord(cur, next partmap.Record) bool {
	if cur.Deadlines.Profile != next.Deadlines.Profile || !maps.Equal(cur.Deadlines.Fields, next.Deadlines.Fields) ||
		len(cur.Profile) != len(next.Profile) {
		return false
	}
	for k, v := range cur.Profile {
		if w, ok := next.Profile[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// planExpiry checks the operations of expiry.go before anything is locked.
func (d *Directory) planExpiry(op partmap.Operation) (partmap.Operation, error) {
	keyField := func(what string) error {
		return &partmap.Error{Code: partmap.EKEYFIELD, Field: partmap.FieldEmail,
			Message: "emailAddress is the profile's key and cannot " + what}
	}
	fields := func(required bool) error {
		if len(op.Fields) == 0 && !required {
			return nil
		}
		return checkFieldNames(op.Fields)
	}
	names := func(field string) bool {
		for _, f := range op.Fields {
			if f == field {
				return true
			}
		}
		return false
	}
	// A time is checked at the plan too, so that one too late is refused
	// whether the profile exists or not, as Redis refuses it.
	when := func(w partmap.When) error {
		_, err := w.Resolve(d.now(), op.LatestDeadline())
		return err
	}
	switch op.Op {
	case partmap.OpExpire:
		if err := fields(false); err != nil {
			return op, err
		}
		if names(partmap.FieldEmail) {
			return op, keyField("expire; expire the profile instead")
		}
		if _, err := partmap.ParseExpireCondition(string(op.ExpireCond)); err != nil {
			return op, err
		}
		return op, when(op.When)
	case partmap.OpPersist:
		return op, fields(false)
	case partmap.OpIncrementFloat:
		if err := d.checkCounter(op.Field); err != nil {
			return op, err
		}
		return op, partmap.ParseFloatIncrement(op.ByFloat)
	case partmap.OpSetIfAbsent:
		if op.Field == "" {
			return op, &partmap.Error{Code: partmap.EINVALID, Field: "field", Message: "name the field to set"}
		}
		return op, d.limits.CheckField(op.Field, op.Value)
	case partmap.OpGetDelete:
		if err := fields(true); err != nil {
			return op, err
		}
		if names(partmap.FieldEmail) {
			return op, keyField("be deleted; delete the profile instead")
		}
		return op, nil
	case partmap.OpGetExpire:
		if err := fields(true); err != nil {
			return op, err
		}
		if op.Expiry.Persist && op.Expiry.When != nil { // keepTTL: CheckMembers
			return op, partmap.Errorf(partmap.EINVALID, "getExpire takes a time or persist, not both")
		}
		if op.Expiry.When != nil {
			if names(partmap.FieldEmail) {
				return op, keyField("expire")
			}
			return op, when(*op.Expiry.When)
		}
		return op, nil
	case partmap.OpSetFields:
		if len(op.Set) == 0 {
			return op, partmap.Errorf(partmap.EINVALID, "name at least one field to set")
		}
		for name, v := range op.Set {
			if v == nil {
				return op, &partmap.Error{Code: partmap.EINVALID, Field: name, Message: fmt.Sprintf("setFields sets values; field %q has none (delete fields with getDelete or a patch)", name)}
			}
		}
		if err := d.checkPatch(op.Set); err != nil {
			return op, err
		}
		if err := checkKeyField(op.Email, op.Set); err != nil {
			return op, err
		}
		switch op.FieldSet {
		case partmap.SetFieldsAlways, partmap.SetIfNoFieldExist, partmap.SetIfAllExist:
		default:
			return op, &partmap.Error{Code: partmap.EINVALID, Field: "condition", Message: fmt.Sprintf("condition %q is not FNX or FXX", op.FieldSet)}
		}
		if op.Expiry.KeepTTL && op.Expiry.When != nil { // persist: CheckMembers
			return op, partmap.Errorf(partmap.EINVALID, "setFields takes a time or keepTTL, not both")
		}
		if op.Expiry.When != nil {
			if _, ok := op.Set[partmap.FieldEmail]; ok {
				return op, keyField("expire")
			}
			return op, when(*op.Expiry.When)
		}
		return op, nil
	}
	return op, fmt.Errorf("directory: no plan for operation %q", op.Op) // CheckMembers refuses unknown kinds first
}
