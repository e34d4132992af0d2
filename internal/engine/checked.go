package engine

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/partmap/partmap"
)

// invokeChecked runs an invocation that declared its records over a
// backend that checks versions (Options.CheckedWrites). It locks those
// records in process, reads them, runs the handler and hands the backend
// its writes without a lease; the backend applies them only if no other
// server holds the partition's lock and every record written is still the
// one that was read. On Redis that is two round trips (a read and the
// commit script) instead of four (lock, read, commit, release), and
// writers of different records of one partition do not wait for each
// other.
//
// It is linearizable because the commit is one atomic step of the backend
// that finds each record it writes as the handler read it: the invocation
// has the effect it would have had run whole at that step. A record that
// another server wrote meanwhile fails the check (ErrChanged) and the
// invocation runs again from its read, within its wait budget. A partition
// whose lock another server holds (its multi-partition write, its
// whole-map lock) refuses the commit with a lock conflict, and the
// invocation runs again under the partition's lock, in what is left of
// the budget, like any other.
func (e *Engine) invokeChecked(ctx context.Context, inv Invocation, fn func(*Tx) error, later bool) (durable func() error, err error) {
	hooks := e.hooks.Load()
	part := inv.Lock[0]
	records := sortedRecords(inv.Records)
	deadline := time.Now().Add(partmap.LockWaitOf(ctx, e.lockWait))
	for {
		t0 := time.Now()
		unlock, err := e.records.lockRecords(ctx, part, records, time.Until(deadline))
		if hooks != nil && hooks.Locked != nil {
			hooks.Locked(time.Since(t0), err)
		}
		if err != nil {
			return nil, err
		}
		tx := &Tx{ctx: ctx, backend: e.backend, inv: inv}
		err = fn(tx)
		tx.done = true
		if err == nil {
			err = tx.err
		}
		if err != nil {
			unlock()
			return nil, err
		}
		writes := e.finish(tx)
		if len(writes) == 0 {
			unlock()
			return durableNow, nil
		}
		if len(writes) != tx.known.len() {
			// The handler read a record it does not write, which the
			// commit would not check: run it under the partition's lock.
			unlock()
			return e.invokeLocked(ctx, inv, fn, later, max(0, time.Until(deadline)))
		}
		t0 = time.Now()
		synced, err := e.backend.Commit(ctx, nil, writes)
		unlock()
		left := time.Until(deadline)
		switch {
		case err == ErrChanged && left > 0:
			continue
		case err == ErrChanged:
			err = partmap.Errorf(partmap.ELOCKCONFLICT, "another server kept writing %s's records; retry the request", part.Partition)
		case errors.Is(err, partmap.ErrLockConflict) && left > 0:
			return e.invokeLocked(ctx, inv, fn, later, left)
		}
		return e.committed(hooks, t0, synced, err, later)
	}
}

// declared checks that the handler may touch email, when the invocation
// declared its records.
func (tx *Tx) declared(part Part, email string) error {
	if len(tx.inv.Records) == 0 {
		return nil
	}
	if len(tx.inv.Records) <= 8 {
		if slices.Contains(tx.inv.Records, email) {
			return nil
		}
	} else {
		if tx.records == nil {
			tx.records = make(map[string]struct{}, len(tx.inv.Records))
			for _, r := range tx.inv.Records {
				tx.records[r] = struct{}{}
			}
		}
		if _, ok := tx.records[email]; ok {
			return nil
		}
	}
	return tx.refuse(ErrUndeclared, part)
}
