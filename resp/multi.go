package resp

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/partmap/partmap"
)

// MULTI, EXEC, DISCARD, WATCH and UNWATCH, on partmap's transactions.
//
// EXEC runs the queued commands' operations, in order, as one partmap
// transaction: they apply as of one instant, whatever other clients do
// meanwhile. Each WATCHed key adds a get at its front whose condition is
// the key's version at the WATCH (its absence, for a key that did not
// exist), so that a change of a watched key fails the whole transaction
// and EXEC answers a null reply, as Redis's does. Every queued operation
// fails alone (partmap.Operation.FailAlone): a command that fails inside
// EXEC answers its error in its place, and the others apply, as in Redis.
// The replies are the commands' own, written from the results.

// transaction is a client's MULTI in progress and its WATCHed keys.
type transaction struct {
	queue   [][][]byte // the queued commands' arguments
	failed  bool       // a command was refused while queued: EXEC aborts
	bytes   int        // the queued arguments' bytes, at most MaxPending
	watched map[string]partmap.Version
}

const maxQueued = 10_000

func cmdMulti(k *call) {
	if k.c.tx.queue != nil {
		k.w.WriteError("ERR MULTI calls can not be nested")
		return
	}
	k.c.tx.queue, k.c.tx.failed = [][][]byte{}, false
	k.w.ok()
}

func cmdDiscard(k *call) {
	if k.c.tx.queue == nil {
		k.w.WriteError("ERR DISCARD without MULTI")
		return
	}
	k.c.tx = transaction{}
	k.w.ok()
}

func cmdUnwatch(k *call) {
	k.c.tx.watched = nil
	k.w.ok()
}

// cmdWatch records the version of each key as it is now (0: absent).
func cmdWatch(k *call) {
	if k.c.tx.queue != nil {
		k.w.WriteError("ERR WATCH inside MULTI is not allowed")
		return
	}
	gets, err := parseExists(k.args, nil)
	if err != nil {
		k.w.fail(err)
		return
	}
	emails := make([]string, len(gets))
	for i, op := range gets {
		emails[i] = op.Email
	}
	recs, err := k.store.FindProfiles(k.ctx, emails)
	if err != nil {
		k.w.WriteError(storeError(err))
		return
	}
	if k.c.tx.watched == nil {
		k.c.tx.watched = map[string]partmap.Version{}
	}
	if len(k.c.tx.watched)+len(emails) > partmap.MaxTransactionOps {
		k.w.WriteError(fmt.Sprintf("ERR a client watches at most %d keys, as a partmap transaction names at most that many profiles", partmap.MaxTransactionOps))
		return
	}
	for i, e := range emails {
		if _, seen := k.c.tx.watched[e]; seen {
			continue // watched from its first WATCH
		}
		var v partmap.Version
		if recs[i] != nil {
			v = recs[i].Version
		}
		k.c.tx.watched[e] = v
	}
	k.w.ok()
}

// enqueue keeps a command for EXEC, or refuses it and dooms the
// transaction.
func (k *call) enqueue(cmd *command) {
	size := 0
	for _, a := range k.args {
		size += len(a)
	}
	if !cmd.queued || len(k.c.tx.queue) >= maxQueued || k.c.tx.bytes+size > MaxPending {
		k.c.tx.failed = true
		k.w.WriteError(fmt.Sprintf("ERR '%s' cannot be queued in a partmap transaction", lower(k.args[0])))
		return
	}
	args := make([][]byte, len(k.args))
	for i, a := range k.args {
		args[i] = bytes.Clone(a)
	}
	k.c.tx.queue = append(k.c.tx.queue, args)
	k.c.tx.bytes += size
	k.w.WriteString("QUEUED")
}

func cmdExec(k *call) {
	tx := k.c.tx
	if tx.queue == nil {
		k.w.WriteError("ERR EXEC without MULTI") // the WATCHes stay, as in Redis
		return
	}
	k.c.tx = transaction{}
	if tx.failed {
		k.w.WriteError("EXECABORT Transaction discarded because of previous errors.")
		return
	}
	var ops []partmap.Operation
	for _, e := range slices.Sorted(maps.Keys(tx.watched)) {
		cond := partmap.Condition{IfNoneMatch: true}
		if v := tx.watched[e]; v != 0 {
			cond = partmap.Condition{IfMatch: []partmap.Version{v}}
		}
		ops = append(ops, partmap.Operation{Op: partmap.OpGet, Email: e, Cond: cond})
	}
	// Each queued command is parsed now, as Redis checks most arguments at
	// EXEC: a refusal is that command's reply, in its place.
	type queued struct {
		cmd        *command
		start, end int // its operations
		err        error
	}
	qs := make([]queued, len(tx.queue))
	for i, args := range tx.queue {
		q := queued{start: len(ops)}
		q.cmd, _ = lookup(args[0])
		if q.cmd.parse != nil {
			more, err := q.cmd.parse(args, ops)
			if q.err = err; err == nil {
				ops = more
			}
		}
		q.end = len(ops)
		qs[i] = q
	}
	if len(ops) > partmap.MaxTransactionSteps {
		k.w.WriteError(fmt.Sprintf("ERR a partmap transaction runs at most %d operations: one for each command queued, each key of DEL, UNLINK and EXISTS, and each key watched; this one has %d", partmap.MaxTransactionSteps, len(ops)))
		return
	}
	for i := len(tx.watched); i < len(ops); i++ {
		ops[i].FailAlone = true
	}
	var results []partmap.OperationResult
	if len(ops) > 0 {
		toStore := make([]partmap.Operation, len(ops))
		for i, op := range ops {
			toStore[i] = sent(op)
		}
		var err error
		switch results, err = k.store.Transact(k.ctx, toStore); {
		case partmap.ErrorCode(err) == partmap.EPRECONDITION: // a watched key changed
			k.w.nullArray()
			return
		case err != nil:
			k.w.WriteError(storeError(err))
			return
		}
	}
	now := time.Now().UnixMilli()
	k.w.WriteArray(len(qs))
	for i, q := range qs {
		switch x := (&exchange{args: tx.queue[i], ops: ops[q.start:q.end], res: results[q.start:q.end]}); {
		case q.err != nil:
			k.w.fail(q.err)
		case q.cmd.parse == nil: // PING, ECHO, UNWATCH, TIME, CONFIG: no profile to read or write
			k.args = x.args
			q.cmd.run(k)
		case q.cmd.ttl:
			x.ttl, x.res[0].Err = deadlinesOf(x.res[0].Record, sent(x.ops[0]).Fields, now)
			fallthrough
		default:
			q.cmd.reply(k.w, x)
		}
	}
}

// deadlinesOf is what Store.Deadlines answers of rec (nil: none) at now:
// for a TTL command in a transaction, whose get read rec. Its clock is
// this server's, at EXEC's reply, where a TTL alone has the store's.
func deadlinesOf(rec *partmap.Record, fields []string, now int64) (partmap.TTLs, error) {
	if rec == nil {
		return partmap.TTLs{}, partmap.ErrNotFound
	}
	t := partmap.TTLs{Profile: partmap.ExpiryNone, Now: now, Version: rec.Version}
	if rec.Deadlines.Profile != 0 {
		t.Profile = rec.Deadlines.Profile
	}
	for _, f := range fields {
		d, expires := rec.Deadlines.Fields[f]
		if _, has := rec.Profile[f]; !has {
			d = partmap.ExpiryNoField
		} else if !expires {
			d = partmap.ExpiryNone
		}
		t.Deadlines = append(t.Deadlines, d)
	}
	return t, nil
}
