package directory

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

func (d *Directory) Transact(ctx context.Context, ops []partmap.Operation) ([]partmap.OperationResult, error) {
	plan, unplanned, err := d.plan(ops)
	if err != nil {
		return nil, err
	}
	if len(plan) == 1 && unplanned == nil && !plan[0].FailAlone {
		// A transaction of one operation is Apply, and as cheap (the
		// HTTP client sends every operation as one).
		res, err := d.applyPlanned(ctx, plan[0])
		switch partmap.ErrorCode(err) {
		case "":
			return []partmap.OperationResult{res}, nil
		case partmap.ELOCKCONFLICT, partmap.EUNAVAILABLE, partmap.ENOTSTARTED:
			return nil, err // the store's, not the operation's
		}
		return nil, inOperation(err, 0, plan[0])
	}
	results, failed, err := d.transact(ctx, plan, unplanned)
	if err != nil {
		if failed >= 0 {
			return nil, inOperation(err, failed, plan[failed])
		}
		return nil, err
	}
	return results, nil
}

// plan checks every operation before anything is locked, and returns
// copies with canonical emails (and a put's profile prepared). An
// operation that fails alone (FailAlone) keeps its failure in unplanned,
// by position; nil when none does.
func (d *Directory) plan(ops []partmap.Operation) (plan []partmap.Operation, unplanned []error, err error) {
	if len(ops) == 0 || len(ops) > partmap.MaxTransactionSteps {
		return nil, nil, partmap.Errorf(partmap.EINVALID, "a transaction takes 1 to %d operations, not %d", partmap.MaxTransactionSteps, len(ops))
	}
	plan = make([]partmap.Operation, len(ops))
	profiles := make(map[string]bool, len(ops))
	for i, op := range ops {
		p, err := d.planOne(op)
		switch {
		case err == nil:
			plan[i] = p
			profiles[p.Email] = true
			if p.To != "" {
				profiles[p.To] = true
			}
		case failsAlone(op, err):
			if unplanned == nil {
				unplanned = make([]error, len(ops))
			}
			plan[i], unplanned[i] = op, err
		default:
			return nil, nil, inOperation(err, i, op)
		}
	}
	if len(profiles) > partmap.MaxTransactionOps {
		return nil, nil, partmap.Errorf(partmap.EINVALID, "a transaction names at most %d profiles; this one names %d", partmap.MaxTransactionOps, len(profiles))
	}
	return plan, unplanned, nil
}

// failsAlone says whether err, op's failure, is op's alone (FailAlone):
// any failure but its Cond's and the store's own.
func failsAlone(op partmap.Operation, err error) bool {
	switch partmap.ErrorCode(err) {
	case partmap.EPRECONDITION, partmap.EINTERNAL, partmap.EUNAVAILABLE, partmap.ELOCKCONFLICT:
		return false
	}
	return op.FailAlone
}

// alone is the result of op, which failed alone with err.
func alone(op partmap.Operation, err error) partmap.OperationResult {
	return partmap.OperationResult{Op: op.Op, Email: op.Email, Err: err}
}

func (d *Directory) planOne(op partmap.Operation) (partmap.Operation, error) {
	if err := op.CheckMembers(); err != nil {
		return op, err
	}
	var err error
	if op.Op == partmap.OpPut {
		if op.Profile, err = d.prepare(op.Profile); err != nil {
			return op, err
		}
		email := op.Profile.Email()
		if op.Email != "" {
			if given, err := partmap.CanonicalEmail(op.Email); err != nil || given != email {
				return op, &partmap.Error{Code: partmap.EINVALID, Field: partmap.FieldEmail,
					Message: fmt.Sprintf("a put's email %q is not its profile's emailAddress %q", op.Email, email)}
			}
		}
		op.Email = email
		return op, nil
	}
	if op.Email, err = partmap.CanonicalEmail(op.Email); err != nil {
		return op, err
	}
	switch op.Op {
	case partmap.OpPatch:
		if err := d.checkPatch(op.Patch); err != nil {
			return op, err
		}
		return op, checkKeyField(op.Email, op.Patch)
	case partmap.OpIncrement:
		return op, d.checkCounter(op.Field)
	case partmap.OpDelete, partmap.OpGet:
		return op, nil // a get's fields may repeat, as HMGET's may
	case partmap.OpRename, partmap.OpCopy:
		if op.To, err = partmap.CanonicalEmail(op.To); err != nil {
			return op, &partmap.Error{Code: partmap.ErrorCode(err), Field: "to", Message: "the new address: " + partmap.ErrorMessage(err)}
		}
		if op.To == op.Email {
			return op, &partmap.Error{Code: partmap.EINVALID, Field: "to",
				Message: fmt.Sprintf("%s is already the profile's email: both addresses canonicalise to it", op.To)}
		}
		// The moved or copied profile must fit the limits under its new,
		// maybe longer, address; checked again on the record at apply time.
		return op, d.limits.CheckField(partmap.FieldEmail, op.To)
	}
	return d.planExpiry(op)
}

// transact runs a planned transaction in one invocation that locks the
// partitions of every email it names (and, during a resize, their mirrors
// in the next generation), so that its writes commit in one atomic step.
// The operations that failed planning alone (unplanned, nil when none
// did) only answer their failure. On an operation's failure it returns
// that operation's position.
func (d *Directory) transact(ctx context.Context, plan []partmap.Operation, unplanned []error) (results []partmap.OperationResult, failed int, err error) {
	if err := d.checkStarted(ctx); err != nil {
		return nil, -1, err
	}
	results = make([]partmap.OperationResult, len(plan))
	var emails []string
	for i, op := range plan {
		if unplanned != nil && unplanned[i] != nil {
			results[i] = alone(op, unplanned[i])
			continue
		}
		emails = append(emails, op.Email)
		if op.To != "" { // a rename's or copy's
			emails = append(emails, op.To)
		}
	}
	if len(emails) == 0 {
		return results, -1, nil // every operation failed alone
	}
	slices.Sort(emails)
	emails = slices.Compact(emails)
	for {
		failed = -1 // a conflict before the handler runs is no operation's
		sv := d.acquire()
		byEmail := make(map[string]staged, len(emails))
		var parts []engine.Part
		for _, e := range emails {
			st := sv.staged(e)
			byEmail[e] = st
			parts = append(parts, st.parts()...)
		}
		slices.SortFunc(parts, engine.Part.Compare)
		parts = slices.Compact(parts)
		err := d.engine.Invoke(ctx, sv.invocation(parts...), func(tx *engine.Tx) error {
			if d.serving.Load() != sv {
				return engine.ErrStale
			}
			// The handler may run again: each run sets every planned
			// operation's result anew.
			failed = -1
			now := d.now()
			for i, op := range plan {
				if unplanned != nil && unplanned[i] != nil {
					continue
				}
				if err := d.apply(tx, byEmail, op, &results[i], now); err != nil {
					if !failsAlone(op, err) {
						failed = i
						return err
					}
					// Nothing of op was staged: an operation fails on
					// its own before it writes.
					results[i] = alone(op, err)
				}
			}
			return nil
		})
		sv.release()
		if err != engine.ErrStale {
			if err != nil {
				return nil, failed, d.explainConflict(err)
			}
			return results, -1, nil
		}
		if err := d.reload(sv); err != nil {
			return nil, -1, err
		}
	}
}

// apply applies one operation inside a transaction's invocation, with the
// semantics of its single-profile call.
func (d *Directory) apply(tx *engine.Tx, byEmail map[string]staged, op partmap.Operation, res *partmap.OperationResult, now int64) error {
	st := byEmail[op.Email]
	st.tx = tx
	cur, err := st.get(now)
	if err != nil {
		return err
	}
	if err := op.Cond.Check(cur); err != nil {
		return err
	}
	if op.Op == partmap.OpRename || op.Op == partmap.OpCopy {
		*res = partmap.OperationResult{Op: op.Op, Email: op.Email}
		if cur == nil {
			return notFound(op.Email)
		}
		return d.moveTo(tx, st, byEmail[op.To], cur, op, res, now)
	}
	return d.applyTo(st, cur, op, res, now)
}

// moveTo renames or copies cur, src's profile, to dst, which must be free
// unless op replaces it.
func (d *Directory) moveTo(tx *engine.Tx, src, dst staged, cur *partmap.Record, op partmap.Operation, res *partmap.OperationResult, now int64) error {
	dst.tx = tx
	taken, err := dst.get(now)
	if err != nil {
		return err
	}
	if taken != nil && !op.Replace {
		return &partmap.Error{Code: partmap.EEXISTS, Field: "to",
			Message: fmt.Sprintf("%s already has a profile; delete it first, or %s to another address", dst.email, op.Op)}
	}
	next := cur.Profile.Clone()
	next[partmap.FieldEmail] = dst.email
	if err := d.limits.CheckProfile(next); err != nil {
		return err
	}
	// The deadlines go with the profile, as RENAME keeps a key's and COPY
	// copies it. The new version differs from the replaced profile's too.
	v := nextVersion(cur.Version)
	for taken != nil && v == taken.Version {
		v = nextVersion(cur.Version)
	}
	rec := partmap.Record{Profile: next, Version: v, Deadlines: cur.Deadlines.Clone()}
	if op.Op == partmap.OpRename {
		if err := src.Delete(partmap.OpRename); err != nil {
			return err
		}
	}
	res.Email, res.Record = dst.email, &rec
	return dst.Put(rec, op.Op)
}

// inOperation tags a user error with the operation it concerns.
func inOperation(err error, i int, op partmap.Operation) error {
	var e *partmap.Error
	if !errors.As(err, &e) || partmap.ErrorCode(err) == partmap.EINTERNAL {
		return err
	}
	tagged := *e
	tagged.Operation = i + 1
	what := string(op.Op)
	if op.Email != "" {
		what += " " + op.Email
	}
	tagged.Message = fmt.Sprintf("operation %d (%s): %s", i+1, what, partmap.ErrorMessage(err))
	return &tagged
}
