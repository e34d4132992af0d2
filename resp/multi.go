package resp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tidwall/redcon"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/pebble"
)

// MULTI, EXEC, DISCARD, WATCH and UNWATCH, on partmap's transactions.
//
// EXEC runs the queued commands, in order, on a copy of the profiles they
// name (a throwaway in-memory store holding what the directory holds for
// them), and then commits what changed in one partmap transaction, with
// each profile's version as it was read as the transaction's condition
// (absence for those that did not exist). So the commands apply all or
// none, as of one instant, whatever other clients do meanwhile: a
// transaction that meets a change made since it read retries from the
// read, and one that meets a change of a WATCHed key since the WATCH
// answers a null reply, as Redis's EXEC does. The replies are the copy's,
// the very command code answering them.

func init() {
	commands["multi"] = spec{arity: 1, flags: []string{"noscript", "loading", "stale", "fast", "allow_busy"}, run: cmdMulti}
	commands["exec"] = spec{arity: 1, flags: []string{"noscript", "loading", "stale", "skip_slowlog"}, run: cmdExec}
	commands["discard"] = spec{arity: 1, flags: []string{"noscript", "loading", "stale", "fast", "allow_busy"}, run: cmdDiscard}
	commands["watch"] = spec{arity: -2, flags: []string{"noscript", "loading", "stale", "fast", "allow_busy"}, keys: [3]int{1, -1, 1}, run: cmdWatch}
	commands["unwatch"] = spec{arity: 1, flags: []string{"noscript", "loading", "stale", "fast", "allow_busy"}, run: cmdUnwatch}
	// The commands a transaction may queue: those on profiles, named by
	// their keys.
	for _, name := range []string{"ping", "echo", "unwatch", "hset", "hmset", "hsetnx", "hget", "hmget", "hgetall", "hkeys", "hvals",
		"hlen", "hexists", "hstrlen", "hdel", "hincrby", "hincrbyfloat", "del", "unlink", "exists", "type",
		"get", "strlen", "llen", "scard", "zcard", "smembers",
		"expire", "pexpire", "expireat", "pexpireat", "ttl", "pttl", "expiretime", "pexpiretime", "persist",
		"hexpire", "hpexpire", "hexpireat", "hpexpireat", "httl", "hpttl", "hexpiretime", "hpexpiretime", "hpersist",
		"hgetdel", "hgetex", "hsetex"} {
		sp := commands[name]
		sp.queued = true
		commands[name] = sp
	}
}

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
	emails, recs, ok := k.findAll()
	if !ok {
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
func (k *call) enqueue(sp spec) {
	size := 0
	for _, a := range k.args {
		size += len(a)
	}
	if !sp.queued || len(k.c.tx.queue) >= maxQueued || k.c.tx.bytes+size > MaxPending {
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
	switch {
	case tx.failed:
		k.w.WriteError("EXECABORT Transaction discarded because of previous errors.")
		return
	}
	keys := map[string]bool{}
	for e := range tx.watched {
		keys[e] = true
	}
	for _, args := range tx.queue {
		for _, i := range keyPositions(commands[lower(args[0])], len(args)) {
			if e, err := partmap.CanonicalEmail(string(args[i])); err == nil {
				keys[e] = true
			}
		}
	}
	emails := slices.Sorted(maps.Keys(keys))
	if len(emails) > partmap.MaxTransactionOps {
		k.w.WriteError(fmt.Sprintf("ERR a partmap transaction names at most %d profiles; this one names %d", partmap.MaxTransactionOps, len(emails)))
		return
	}
	pause := time.Millisecond
	for attempt := 0; ; attempt++ {
		replies, committed, err := k.execOnce(tx, emails)
		switch {
		case err != nil:
			k.w.WriteError(storeError(err))
			return
		case replies == nil: // a watched key changed
			k.w.nullArray()
			return
		case committed:
			k.w.WriteArray(len(tx.queue))
			k.w.WriteRaw(replies)
			return
		case attempt == 100 || k.ctx.Err() != nil:
			k.w.WriteError("TRYAGAIN the transaction's profiles kept changing under it; retry")
			return
		}
		// Another client got in between: again from the read, after a
		// pause that grows, so that contending transactions spread out.
		time.Sleep(pause/2 + rand.N(pause))
		pause = min(2*pause, 20*time.Millisecond)
	}
}

// keyPositions are the arguments of a command that are keys.
func keyPositions(sp spec, n int) []int {
	first, last, step := sp.keys[0], sp.keys[1], sp.keys[2]
	if first == 0 {
		return nil
	}
	if last < 0 {
		last = n + last
	}
	var out []int
	for i := first; i <= last && i < n; i += max(step, 1) {
		out = append(out, i)
	}
	return out
}

// execOnce reads the transaction's profiles, runs its commands on a copy
// of them and commits the differences under the versions read. It
// reports nil replies when a watched key changed, and committed false
// when a profile changed after the read (the caller runs it again).
func (k *call) execOnce(tx transaction, emails []string) (replies []byte, committed bool, err error) {
	before, err := k.store.FindProfiles(k.ctx, emails)
	if err != nil {
		return nil, false, err
	}
	for i, e := range emails {
		if v, ok := tx.watched[e]; ok && v != versionOf(before[i]) {
			return nil, false, nil
		}
	}
	// The copy's writes are durable at once (in memory): its context
	// defers nothing to the client's pipeline.
	local := context.Background()
	// No record cache: its 16 MB would be allocated for every EXEC.
	scratch, err := pebble.Open("/tx", &pebble.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1, Indexes: []string{}, SweepInterval: -1}, FS: vfs.NewMem(), RecordCacheBytes: -1})
	if err != nil {
		return nil, false, err
	}
	defer scratch.Close()
	if _, err := scratch.Start(local); err != nil {
		return nil, false, err
	}
	for _, r := range before {
		if r == nil {
			continue
		}
		ops := append([]partmap.Operation{{Op: partmap.OpPut, Profile: r.Profile}}, deadlineOps(r)...)
		if _, err := scratch.Transact(local, ops); err != nil {
			return nil, false, fmt.Errorf("resp: copying %s for a transaction: %w", r.Profile.Email(), err)
		}
	}
	buf := &bufConn{}
	buf.Writer = redcon.NewWriter(&buf.out)
	run := &call{s: k.s, c: k.c, w: &writer{Conn: buf, proto: k.c.proto}, conn: buf, ctx: local, store: scratch}
	for _, args := range tx.queue {
		run.args = args
		commands[lower(args[0])].run(run)
	}
	if err := buf.Flush(); err != nil {
		return nil, false, err
	}
	after, err := scratch.FindProfiles(local, emails)
	if err != nil {
		return nil, false, err
	}
	var ops []partmap.Operation
	for i, e := range emails {
		ops = append(ops, commitOps(e, before[i], after[i])...)
	}
	if len(ops) > partmap.MaxTransactionOps {
		return nil, false, partmap.Errorf(partmap.EINVALID, "the transaction changes too much for one partmap transaction (%d operations, at most %d)", len(ops), partmap.MaxTransactionOps)
	}
	if len(ops) > 0 {
		if _, err := k.store.Transact(k.ctx, ops); partmap.ErrorCode(err) == partmap.EPRECONDITION {
			return buf.out.Bytes(), false, nil
		} else if err != nil {
			return nil, false, err
		}
	}
	return buf.out.Bytes(), true, nil
}

func versionOf(r *partmap.Record) partmap.Version {
	if r == nil {
		return 0
	}
	return r.Version
}

// commitOps turn a profile's state before the transaction into its state
// after, under the condition that it is still as read. An unchanged
// profile gets a write that changes nothing (restating its key), and an
// absent one a creation and deletion, so that the condition still holds.
func commitOps(email string, before, after *partmap.Record) []partmap.Operation {
	was := partmap.Condition{IfNoneMatch: true}
	if before != nil {
		was = partmap.Condition{IfMatch: []partmap.Version{before.Version}}
	}
	switch {
	case before == nil && after == nil:
		return []partmap.Operation{
			{Op: partmap.OpPut, Profile: partmap.Profile{partmap.FieldEmail: email}, Cond: was},
			{Op: partmap.OpDelete, Email: email},
		}
	case after == nil:
		return []partmap.Operation{{Op: partmap.OpDelete, Email: email, Cond: was}}
	case before != nil && sameState(before, after):
		restate := email
		return []partmap.Operation{{Op: partmap.OpPatch, Email: email, Patch: partmap.Patch{partmap.FieldEmail: &restate}, Cond: was}}
	}
	return append([]partmap.Operation{{Op: partmap.OpPut, Profile: after.Profile, Cond: was}}, deadlineOps(after)...)
}

func sameState(a, b *partmap.Record) bool {
	return maps.Equal(a.Profile, b.Profile) && a.Deadlines.Profile == b.Deadlines.Profile && maps.Equal(a.Deadlines.Fields, b.Deadlines.Fields)
}

// deadlineOps set a record's deadlines again after a put, which drops
// them: one expire for the profile, one for each deadline of its fields.
func deadlineOps(r *partmap.Record) []partmap.Operation {
	email := r.Profile.Email()
	var ops []partmap.Operation
	if d := r.Deadlines.Profile; d != 0 {
		ops = append(ops, partmap.Operation{Op: partmap.OpExpire, Email: email, When: partmap.When{Millis: d}})
	}
	byDeadline := map[int64][]string{}
	for f, d := range r.Deadlines.Fields {
		byDeadline[d] = append(byDeadline[d], f)
	}
	for _, d := range slices.Sorted(maps.Keys(byDeadline)) {
		fields := byDeadline[d]
		slices.Sort(fields)
		ops = append(ops, partmap.Operation{Op: partmap.OpExpire, Email: email, Fields: fields, When: partmap.When{Millis: d}})
	}
	return ops
}

// bufConn is a redcon.Conn whose replies go to a buffer: a transaction's
// commands answer into it before EXEC answers for them all.
type bufConn struct {
	*redcon.Writer
	out bytes.Buffer
	ctx any
}

func (c *bufConn) RemoteAddr() string { return "exec" }
func (c *bufConn) Close() error {
	return errors.New("resp: a queued command cannot close the connection")
}
func (c *bufConn) Context() any                        { return c.ctx }
func (c *bufConn) SetContext(v any)                    { c.ctx = v }
func (c *bufConn) SetReadBuffer(int)                   {}
func (c *bufConn) Detach() redcon.DetachedConn         { return nil }
func (c *bufConn) ReadPipeline() []redcon.Command      { return nil }
func (c *bufConn) PeekPipeline() []redcon.Command      { return nil }
func (c *bufConn) NetConn() net.Conn                   { return nil }
func (c *bufConn) WriteBulkFrom(n int64, rb io.Reader) { c.Writer.WriteBulkFrom(n, rb) }
