package redis

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
	"github.com/partmap/partmap/internal/record"
)

// backend keeps a directory in Redis, every layout generation under a
// namespace of its own (NS for generation 0, NS@G for generation G), so
// that a resize writes its next generation beside the current one.
type backend struct {
	client     goredis.UniversalClient
	ttl        time.Duration
	ns         string // the directory's namespace
	acks       int
	ackTimeout time.Duration
	batch      *batcher     // the commands of lookups and commits
	streams    atomic.Int64 // how many change feeds there are, as far as this process knows (feed.go)
	streamsMu  sync.Mutex   // one raise of streams at a time

	serving atomic.Pointer[[]engine.Layout] // the layouts the directory serves, for the backstop

	hints     *hinter           // hints of this server's commits, until flushed (hints.go)
	retention partmap.Retention // the feed's, for the backstop
	clock     func() time.Time  // the directory's, for the backstop
	feedMu    sync.Mutex
	feedStats map[int]streamStat // what each stream held at its last trim or look
}

func (b *backend) now() time.Time {
	if b.clock != nil {
		return b.clock()
	}
	return time.Now()
}

var (
	_ engine.Backend       = (*backend)(nil)
	_ engine.Shared        = (*backend)(nil)
	_ engine.Feeder        = (*backend)(nil)
	_ engine.Hints         = (*backend)(nil)
	_ engine.LayoutWatcher = (*backend)(nil)
)

// Serving keeps the layouts the directory hands down (engine.LayoutWatcher).
func (b *backend) Serving(layouts []engine.Layout) { b.serving.Store(&layouts) }

// Keys. A partition's keys start with its hash tag, before anything else:
// the namespace and the email may themselves contain braces.
func (b *backend) metaKey() string { return "partmap:" + b.ns + ":meta" }

func (b *backend) key(part engine.Part) string {
	ns := b.ns
	if part.Generation > 0 {
		ns += "@" + strconv.Itoa(part.Generation)
	}
	return "{" + part.Partition.String() + "}:" + ns + ":"
}

// stateKey holds a partition's mark (engine.Shared.Mark): "resizing" while a
// resize copies its generation, "retired" once one has replaced it, so that
// a server that has not noticed the resize cannot write, or read, the wrong
// generation.
func (b *backend) stateKey(part engine.Part) string  { return b.key(part) + "state" }
func (b *backend) lockKey(part engine.Part) string   { return b.key(part) + "lock" }
func (b *backend) countKey(part engine.Part) string  { return b.key(part) + "count" }
func (b *backend) emailsKey(part engine.Part) string { return b.key(part) + "emails" }

// pendingKey holds the intent of a transaction over several partitions
// that is pending on the partition; txKey is a transaction's record, in
// its primary partition's slot (tx.go).
func (b *backend) pendingKey(part engine.Part) string { return b.key(part) + "pending" }
func (b *backend) txKey(primary engine.Part, txid string) string {
	return b.key(primary) + "tx:" + txid
}

// fenceKey is written only to be waited on (fence.lua).
func (b *backend) fenceKey(part engine.Part) string { return b.key(part) + "fence" }

func (b *backend) recordKey(part engine.Part, email string) string {
	return b.key(part) + "r:" + email
}

// indexKey is the sorted set of one indexed field's entries in a
// partition. Its members are indexMember(value, email), all with score 0,
// so that they sort by value, then email.
func (b *backend) indexKey(part engine.Part, field int) string {
	return b.indexKeyPrefix(part) + strconv.Itoa(field)
}

// indexKeyPrefix is what every indexKey of part starts with.
func (b *backend) indexKeyPrefix(part engine.Part) string { return b.key(part) + "x:" }

// indexMember prefixes the value with its length (4 bytes, big-endian), so
// that one value's members are exactly those that start with its prefix,
// whatever bytes the value holds; the email (ASCII) follows.
func indexMember(value, email string) string {
	return valuePrefix(value) + email
}

// entryMember is e's member in its field's sorted set: a search entry's
// is its tail (engine.EntryTail), which ZRANGEBYLEX reads in ranges.
func entryMember(e engine.IndexEntry) string {
	if e.Field >= engine.SearchFieldBase {
		return engine.EntryTail(e.Value, e.Email)
	}
	return indexMember(e.Value, e.Email)
}

func valuePrefix(value string) string {
	return string(binary.BigEndian.AppendUint32(nil, uint32(len(value)))) + value
}

func parseIndexMember(m string) (engine.IndexEntry, bool) {
	if len(m) < 4 {
		return engine.IndexEntry{}, false
	}
	n := binary.BigEndian.Uint32([]byte(m[:4]))
	if uint64(n) > uint64(len(m)-4) {
		return engine.IndexEntry{}, false
	}
	return engine.IndexEntry{Value: m[4 : 4+n], Email: m[4+n:]}, true
}

// Meta reads the metadata with GET, and updates it in an optimistic
// transaction (WATCH, MULTI, SET, EXEC) that starts again when another
// server changed it meanwhile.
func (b *backend) Meta(ctx context.Context, update func([]byte) ([]byte, error)) ([]byte, error) {
	key := b.metaKey()
	get := func(c goredis.Cmdable) ([]byte, error) {
		v, err := c.Get(ctx, key).Bytes()
		if errors.Is(err, goredis.Nil) {
			return nil, nil
		}
		return v, unavailable(err)
	}
	if update == nil {
		return get(b.client)
	}
	for range 100 {
		var out []byte
		var failed error // update's own error, returned as it is
		err := b.client.Watch(ctx, func(tx *goredis.Tx) error {
			old, err := get(tx)
			if err != nil {
				return err
			}
			if out, failed = update(old); failed != nil || bytes.Equal(out, old) {
				return nil
			}
			_, err = tx.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
				pipe.Set(ctx, key, out, 0)
				return nil
			})
			return err
		}, key)
		switch {
		case errors.Is(err, goredis.TxFailedErr):
			continue // changed meanwhile: read again
		case failed != nil:
			return nil, failed
		case err != nil:
			return nil, unavailable(err)
		}
		return out, nil
	}
	return nil, partmap.Errorf(partmap.EUNAVAILABLE, "the metadata kept changing; retry")
}

// lease is a set of partition locks held under one token. A lease of the
// process's own (an invocation's, a snapshot's) renews its locks every
// third of their time to live until released, so that a lock outlives a
// dead server, or a release lost in a failover, by at most that TTL, while
// a long hold (a resize's copy of a big partition, an export) keeps it. A
// named lease (the whole-map lock) is the store's: its locks last until
// its end without renewal, and whoever presents the name takes them over.
type lease struct {
	b     *backend
	token string
	named bool

	mu    sync.Mutex
	parts []engine.Part
	timer *time.Timer
	// valid is when the locks held run out unless a renewal lands first,
	// by this process's clock: from before the command that took or last
	// renewed them was sent, so never later than by Redis's.
	valid    time.Time
	released bool
	lost     error
}

func (l *lease) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// renew extends every lock held to the usual TTL, in one pipeline, and
// schedules the next renewal unless the lease is released. A renewal that
// gets no answer (the client's connections all busy on a loaded machine,
// a Redis slow to reply) is tried again soon, for as long as the locks may
// still hold: only a lock found gone, or run out before any renewal
// landed, loses the lease. (Giving up after a third of the TTL lost the
// locks of exports and resize copies that were still at work.)
func (l *lease) renew() {
	l.mu.Lock()
	parts := slices.Clone(l.parts)
	valid := l.valid
	l.mu.Unlock()
	started := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), valid)
	pipe := l.b.client.Pipeline()
	cmds := make([]*goredis.Cmd, len(parts))
	for i, p := range parts {
		cmds[i] = extendScript.Eval(ctx, pipe, []string{l.b.lockKey(p)}, l.token, l.b.ttl.Milliseconds())
	}
	pipe.Exec(ctx)
	cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released || l.lost != nil {
		return
	}
	for i, c := range cmds {
		n, err := c.Int()
		switch {
		case err == nil && n == 1:
			continue
		case err != nil && time.Now().Before(valid):
			l.timer.Reset(min(l.b.ttl/10, time.Until(valid)/2))
			return
		}
		l.lost = partmap.Errorf(partmap.EUNAVAILABLE,
			"the lock on %s was lost while held (a Redis failover or a stall), so what ran under it, an export say, did not see one consistent snapshot; run it again", parts[i].Partition)
		return
	}
	// A lock taken while this ran was taken after it began, or at worst a
	// round trip before: it lasts about as long, and the next renewal
	// extends it.
	l.valid = started.Add(l.b.ttl)
	l.timer.Reset(l.b.ttl / 3)
}

// Release frees the locks, in one pipeline; an error means one was lost
// while held.
func (l *lease) Release() error {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return l.err()
	}
	l.released = true
	if l.timer != nil {
		l.timer.Stop()
	}
	parts := l.parts
	l.parts = nil
	l.mu.Unlock()
	// A release lost to a failing Redis only leaves the lock to its TTL, so
	// it is not worth waiting long for.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	pipe := l.b.client.Pipeline()
	for _, p := range parts {
		// Only the owner deletes a lock: after its TTL it may be somebody else's.
		releaseScript.Eval(ctx, pipe, []string{l.b.lockKey(p)}, l.token)
	}
	if len(parts) > 0 {
		pipe.Exec(ctx)
	}
	return l.err()
}

// Lock takes the partitions' locks in order with SET NX PX, polling a held
// one with a growing backoff until wait has passed: only a lock that is
// actually held is polled. A named lease takes each lock with a script
// that also accepts one held under the same name.
func (b *backend) Lock(ctx context.Context, parts []engine.Part, wait time.Duration, named engine.Named) (engine.Lease, error) {
	if err := b.ensureStreams(ctx, streamsOf(parts)); err != nil {
		return nil, err
	}
	l := &lease{b: b, token: named.Lease, named: named.Lease != ""}
	ttl := b.ttl
	if l.named {
		if ttl = time.Until(named.Until); ttl < time.Millisecond {
			return nil, partmap.Errorf(partmap.ENOTFOUND, "the lease has expired")
		}
	} else {
		raw := make([]byte, 16)
		rand.Read(raw)
		l.token = hex.EncodeToString(raw)
		l.mu.Lock()
		l.valid = time.Now().Add(b.ttl)
		l.timer = time.AfterFunc(b.ttl/3, l.renew)
		l.mu.Unlock()
	}
	deadline := time.Now().Add(wait)
	for _, p := range parts {
		for backoff := time.Millisecond; ; backoff = min(2*backoff, 20*time.Millisecond) {
			var ok bool
			var err error
			if l.named {
				var n int
				n, err = takeScript.Run(ctx, b.client, []string{b.lockKey(p)}, l.token, ttl.Milliseconds()).Int()
				ok = n == 1
			} else {
				ok, err = b.client.SetNX(ctx, b.lockKey(p), l.token, ttl).Result()
			}
			if err != nil {
				l.Release()
				return nil, unavailable(err)
			}
			if ok {
				l.mu.Lock()
				l.parts = append(l.parts, p)
				l.mu.Unlock()
				break
			}
			remaining := time.Until(deadline)
			if remaining <= 0 {
				l.Release()
				return nil, partmap.Errorf(partmap.ELOCKCONFLICT, "%s is locked by another writer; retry the request", p.Partition)
			}
			select {
			case <-ctx.Done():
				l.Release()
				return nil, ctx.Err()
			case <-time.After(min(backoff, remaining)):
			}
		}
	}
	return l, nil
}

// Get reads the records, the partition's state, its pending intent and
// its lock in one MGET (one slot): a retired generation must not answer
// for the one that replaced it, and a transaction pending on the
// partition must be resolved first unless it has not committed
// (resolve). Without an intent, that is the one round trip.
func (b *backend) Get(ctx context.Context, part engine.Part, emails []string) ([]*partmap.Record, error) {
	for try := 0; ; try++ {
		recs, extra, err := b.mgetRecords(ctx, part, emails, b.stateKey(part), b.pendingKey(part), b.lockKey(part))
		if err != nil {
			return nil, err
		}
		if state, _ := extra[0].(string); state == string(engine.StageRetired) {
			return nil, engine.ErrStale
		}
		intent, _ := extra[1].(string)
		if intent == "" {
			return recs, nil
		}
		lock, _ := extra[2].(string)
		inFlight, err := b.resolve(ctx, part, intent, lock)
		if err != nil {
			return nil, err
		}
		if inFlight {
			return recs, nil // read before the transaction's commit point
		}
		if try == maxResolves {
			return nil, partmap.Errorf(partmap.EUNAVAILABLE, "transactions kept pending on %s; retry", part.Partition)
		}
	}
}

// mgetRecords reads the records of emails in part, nil where absent, and
// the values of extra keys of part's slot, in one MGET.
func (b *backend) mgetRecords(ctx context.Context, part engine.Part, emails []string, extra ...string) ([]*partmap.Record, []any, error) {
	keys := make([]string, 0, len(emails)+len(extra))
	for _, e := range emails {
		keys = append(keys, b.recordKey(part, e))
	}
	args := make([]any, 0, 1+len(keys)+len(extra))
	args = append(args, "mget")
	for _, k := range keys {
		args = append(args, k)
	}
	for _, k := range extra {
		args = append(args, k)
	}
	cmd := goredis.NewSliceCmd(ctx, args...)
	b.batch.do(ctx, cmd)
	vals, err := cmd.Result()
	if err != nil {
		return nil, nil, unavailable(err)
	}
	out := make([]*partmap.Record, len(emails))
	for i, v := range vals[:len(emails)] {
		s, ok := v.(string)
		if !ok {
			continue
		}
		rec, err := record.Decode([]byte(s))
		if err != nil {
			return nil, nil, fmt.Errorf("%s %s: %w", part.Partition, emails[i], err)
		}
		out[i] = &rec
	}
	return out, vals[len(emails):], nil
}

// Commit applies writes atomically. Writes to one partition are one run
// of the commit script in its slot; without a lease (the engine's checked
// writes), the script refuses a partition whose lock is held and a record
// that is not at the version read. Writes to several partitions, whose
// slots no one script spans on Redis Cluster, commit as a transaction
// (commitTx, DESIGN.md).
func (b *backend) Commit(ctx context.Context, l engine.Lease, writes []engine.Write) (func() error, error) {
	var token string
	if l, ok := l.(*lease); ok {
		token = l.token
	}
	byPart := map[engine.Part][]engine.Write{}
	var order []engine.Part
	for _, w := range writes {
		if _, ok := byPart[w.Part]; !ok {
			order = append(order, w.Part)
		}
		byPart[w.Part] = append(byPart[w.Part], w)
	}
	if err := b.ensureStreams(ctx, streamsOf(order)); err != nil {
		return nil, err
	}
	if len(order) > 1 {
		if token == "" {
			return nil, errors.New("redis: a commit of several partitions needs their locks")
		}
		slices.SortFunc(order, engine.Part.Compare)
		if err := b.commitTx(ctx, token, order, byPart); err != nil {
			return nil, err
		}
		return func() error { return nil }, nil
	}
	p := order[0]
	ws := partWrites(byPart[p])
	for try := 0; ; try++ {
		_, err := b.step(ctx, p, "commit", token, accepts(byPart[p]), "", "", "", ws)
		if scriptError(err) == "PARTMAP_PENDING" && try < 3 {
			// A transaction whose committer died (its lock is gone, or the
			// script would have said BUSY) left an intent: resolve it and
			// run again. The versions checked then say whether the writer
			// read what is there now. A writer with a lock read the
			// partition after the intent was written, and resolved it
			// then: meeting one now, it cannot know what it read.
			inFlight, err := b.settle(ctx, p)
			if err != nil {
				return nil, err
			}
			if token != "" || inFlight {
				return nil, partmap.Errorf(partmap.ELOCKCONFLICT, "a transaction was pending on %s; nothing was written, retry", p.Partition)
			}
			continue
		}
		if scriptError(err) == "" {
			b.hints.noteWrites(p, ws) // applied, or perhaps (no reply): a hint too many is harmless
		}
		if err != nil {
			return nil, commitError(p, err)
		}
		return func() error { return nil }, nil
	}
}

// commitError translates a commit script's refusal, which wrote nothing,
// or its failure to answer, which leaves its outcome unknown.
func commitError(p engine.Part, err error) error {
	switch scriptError(err) {
	case "PARTMAP_LOCK_LOST", "PARTMAP_ABORTED":
		return partmap.Errorf(partmap.ELOCKCONFLICT, "the lock of %s expired before the commit; nothing was written, retry", p.Partition)
	case "PARTMAP_BUSY", "PARTMAP_PENDING":
		return partmap.Errorf(partmap.ELOCKCONFLICT, "%s is locked by another writer; retry the request", p.Partition)
	case "PARTMAP_CHANGED":
		return engine.ErrChanged
	case "PARTMAP_STALE":
		return engine.ErrStale
	}
	var perr *partmap.Error
	if errors.As(err, &perr) {
		return err
	}
	// The script may have run: a broken connection can lose its reply,
	// and it is never sent twice (onceCmd).
	return &partmap.Error{Code: partmap.EUNAVAILABLE, Err: err,
		Message: fmt.Sprintf("the write to %s may or may not have been applied (%v); read before retrying", p.Partition, err)}
}

// accepts returns the marks a partition's writes accept, for the script.
func accepts(ws []engine.Write) string {
	if ws[0].Fence == engine.StageResizing {
		return ",," + string(engine.StageResizing) + ","
	}
	return ",,"
}

// partWrite is one write as the commit script takes it, and as a pending
// intent keeps it for whoever rolls the partition forward.
type partWrite struct {
	Email string    `json:"e"`
	Value []byte    `json:"v,omitempty"` // the encoded record; none deletes
	Prev  []byte    `json:"p,omitempty"` // the version replaced; none creates
	Index []indexOp `json:"x,omitempty"`
	// Head is the head of the write's change feed event
	// (record.AppendEventHead), which the script completes with Value;
	// none for a write that records no event (engine.Move). An intent
	// carries it, so that whoever rolls the partition forward appends the
	// event.
	Head []byte `json:"h,omitempty"`
	// Stamp says the script ends Value with the commit time
	// (record.AppendCommitted): its event's, or for a mirror, which has
	// none, the master's clock. Value is then encoded without one. A copy
	// keeps the time it was read with.
	Stamp bool `json:"t,omitempty"`
}

type indexOp struct {
	Field  int    `json:"f"`
	Add    bool   `json:"a,omitempty"`
	Member []byte `json:"m"`
}

func partWrites(writes []engine.Write) []partWrite {
	out := make([]partWrite, len(writes))
	for i, w := range writes {
		pw := partWrite{Email: w.Email}
		if w.Change != engine.Move {
			pw.Head = record.AppendEventHead(nil, w.Change, w.Email, w.Record == nil)
		}
		if w.Record != nil {
			rec := *w.Record
			if !w.Copy {
				rec.Committed, pw.Stamp = 0, true
			}
			pw.Value = record.Encode(rec)
		}
		if !w.Created {
			pw.Prev = binary.BigEndian.AppendUint64(nil, uint64(w.Prev))
		}
		for _, e := range w.Remove {
			pw.Index = append(pw.Index, indexOp{Field: e.Field, Member: []byte(entryMember(e))})
		}
		for _, e := range w.Add {
			pw.Index = append(pw.Index, indexOp{Field: e.Field, Add: true, Member: []byte(entryMember(e))})
		}
		out[i] = pw
	}
	return out
}

// step runs the commit script in one of its modes on p's slot, with its
// keys and arguments laid out as the script's header says.
func (b *backend) step(ctx context.Context, p engine.Part, mode, token, accept, txid, intent, txKey string, ws []partWrite) (any, error) {
	if txKey == "" {
		txKey = b.pendingKey(p)
	}
	keys := []string{b.lockKey(p), b.countKey(p), b.emailsKey(p), b.stateKey(p), b.pendingKey(p), txKey, b.feedKey(p.Partition)}
	args := []any{mode, token, len(ws), accept, txid, intent}
	var indexKeys []string
	var indexArgs []any
	for _, w := range ws {
		keys = append(keys, b.recordKey(p, w.Email))
		stamp := ""
		if w.Stamp {
			stamp = "t"
		}
		args = append(args, w.Email, string(w.Value), string(w.Prev), string(w.Head), stamp)
		for _, x := range w.Index {
			indexKeys = append(indexKeys, b.indexKey(p, x.Field))
			op := "-"
			if x.Add {
				op = "+"
			}
			indexArgs = append(indexArgs, op, string(x.Member))
		}
	}
	keys = append(keys, indexKeys...)
	args = append(args, indexArgs...)
	return b.run(ctx, commitScript, keys, args)
}

// run runs a script; with MinReplicasAck, it sends WAIT on the same
// connection to the partition's master, since WAIT counts the
// acknowledgements of that connection's own writes.
func (b *backend) run(ctx context.Context, s *luaScript, keys []string, args []any) (any, error) {
	if b.acks == 0 {
		return b.runScript(ctx, s, keys, args)
	}
	var node *goredis.Client
	switch c := b.client.(type) {
	case *goredis.ClusterClient:
		var err error
		if node, err = c.MasterForKey(ctx, keys[0]); err != nil {
			return nil, err
		}
	case *goredis.Client:
		node = c
	default:
		return nil, fmt.Errorf("redis: replica acknowledgements need a client or a cluster client, not %T", b.client)
	}
	pipe := node.Pipeline()
	eval := sendOnce(ctx, "eval", s.src, keys, args) // the pipeline is never sent twice
	_ = pipe.Process(ctx, eval)
	wait := pipe.Do(ctx, "WAIT", b.acks, b.ackTimeout.Milliseconds())
	if _, err := pipe.Exec(ctx); err != nil {
		if eval.Err() != nil {
			return nil, eval.Err()
		}
		return nil, err
	}
	n, err := wait.Int()
	connected := -1 // not asked
	if h := replicaHook.Load(); h != nil && err == nil {
		n, connected = (*h)(keys)
	}
	if err != nil || n < b.acks {
		if err == nil {
			err = errFewReplicas
			if connected < 0 {
				connected = replicas(ctx, node)
			}
			if n >= connected {
				err = errNoneBehind // every replica the master has acknowledged it
			}
		}
		return eval.Val(), &partmap.Error{Code: partmap.EUNAVAILABLE, Err: err,
			Message: fmt.Sprintf("the write was applied but only %d of the %d required replicas acknowledged it in %v", n, b.acks, b.ackTimeout)}
	}
	return eval.Val(), nil
}

// replicas is how many replicas node's ROLE lists, or 1 when it cannot
// tell.
func replicas(ctx context.Context, node *goredis.Client) int {
	role, err := node.Do(ctx, "ROLE").Slice()
	if err != nil || len(role) < 3 || role[0] != "master" {
		return 1
	}
	list, ok := role[2].([]any)
	if !ok {
		return 1
	}
	return len(list)
}

// replicaHook, set by tests only, replaces what WAIT found for a script
// on keys, and how many replicas its master has: a test makes one
// master's replica fall behind, or go.
// A background finisher reads it while tests set it.
var replicaHook atomic.Pointer[func(keys []string) (acked, connected int)]

// errFewReplicas is why a write was answered as unavailable although
// applied: WAIT counted fewer replicas than MinReplicasAck. The script's
// reply comes with it.
var errFewReplicas = errors.New("redis: too few replicas acknowledged the write")

// errNoneBehind is errFewReplicas when no replica of the master lacks the
// write: it has fewer replicas than MinReplicasAck (none, as after a
// failover until the old master returns), and each acknowledged it. No
// failover can then take over without the write, and tx.go goes on.
var errNoneBehind = fmt.Errorf("%w: the master has no other replica", errFewReplicas)

// runScript runs a script through the batcher: EVALSHA, then EVAL after a
// NOSCRIPT (a server that has not seen the script, as after a failover),
// which means the script did not run. Neither is ever sent twice
// (sendOnce).
func (b *backend) runScript(ctx context.Context, s *luaScript, keys []string, args []any) (any, error) {
	cmd := sendOnce(ctx, "evalsha", s.Hash(), keys, args)
	b.batch.do(ctx, cmd)
	if err := cmd.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		cmd = sendOnce(ctx, "eval", s.src, keys, args)
		_ = b.client.Process(ctx, cmd)
	}
	return cmd.Result()
}

// onceCmd is a command that go-redis sends once: after a connection
// breaks, it retries other commands on a new one, and a script that ran
// but whose reply was lost would run again. A commit run again meets its
// own write and reports a conflict, and the engine then applies the write
// a second time; a transaction's commit point run again reports the
// transaction aborted, though it committed. Sent once, such a script's
// outcome is unknown to the caller, who is told so.
type onceCmd struct{ *goredis.Cmd }

func (onceCmd) NoRetry() bool { return true }

// sendOnce returns the command EVALSHA or EVAL of script (its SHA-1 or
// its source) on keys with args, as an onceCmd.
func sendOnce(ctx context.Context, verb, script string, keys []string, args []any) onceCmd {
	cmdArgs := make([]any, 0, 3+len(keys)+len(args))
	cmdArgs = append(cmdArgs, verb, script, len(keys))
	for _, k := range keys {
		cmdArgs = append(cmdArgs, k)
	}
	cmdArgs = append(cmdArgs, args...)
	return onceCmd{goredis.NewCmd(ctx, cmdArgs...)}
}

// Counts reads the count keys in one pipeline, with the first partition's
// state (a retired generation must not answer) and every partition's
// intent and lock: the counts are read again once an intent is resolved.
func (b *backend) Counts(ctx context.Context, gen int, first, end partmap.Partition) ([]partmap.PartitionCount, error) {
	if first >= end {
		return nil, nil
	}
	for try := 0; ; try++ {
		pipe := b.client.Pipeline()
		state := pipe.Get(ctx, b.stateKey(engine.Part{Generation: gen, Partition: first}))
		cmds := make([]*goredis.StringCmd, end-first)
		txs := make([]*goredis.SliceCmd, end-first)
		for i := range cmds {
			part := engine.Part{Generation: gen, Partition: first + partmap.Partition(i)}
			txs[i] = pipe.MGet(ctx, b.pendingKey(part), b.lockKey(part))
			cmds[i] = pipe.Get(ctx, b.countKey(part))
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
			return nil, unavailable(err)
		}
		if s, _ := state.Result(); s == string(engine.StageRetired) {
			return nil, engine.ErrStale
		}
		again, err := b.resolveAll(ctx, gen, first, txs)
		if err != nil {
			return nil, err
		}
		if again {
			if try == maxResolves {
				return nil, partmap.Errorf(partmap.EUNAVAILABLE, "transactions kept pending; retry")
			}
			continue
		}
		var out []partmap.PartitionCount
		for i, c := range cmds {
			p := first + partmap.Partition(i)
			n, err := c.Result()
			if errors.Is(err, goredis.Nil) {
				continue
			}
			count, perr := strconv.ParseInt(strings.TrimSpace(n), 10, 64)
			if err != nil || perr != nil {
				return nil, fmt.Errorf("redis: count of %s: %v %v", p, err, perr)
			}
			out = append(out, partmap.PartitionCount{Partition: p, Profiles: count})
		}
		return out, nil
	}
}

// IndexEntries reads the sorted sets of every field an index can have, in
// one pipeline with the partition's intent and lock: entries of a field
// the directory does not index show too. A script reads the sets, so
// that the ones that do not exist, most of them, cost no command each.
func (b *backend) IndexEntries(ctx context.Context, part engine.Part) ([]engine.IndexEntry, error) {
	prefix := b.indexKeyPrefix(part)
	var keys []string
	var fields []int
	for field := range engine.MaxSearchField + 1 {
		if field >= engine.IndexFields && field < engine.SearchFieldBase {
			continue
		}
		keys = append(keys, prefix+strconv.Itoa(field))
		fields = append(fields, field)
	}
	for try := 0; ; try++ {
		pipe := b.client.Pipeline()
		tx := pipe.MGet(ctx, b.pendingKey(part), b.lockKey(part))
		sets := pipe.Eval(ctx, entriesScript.src, keys)
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, unavailable(err)
		}
		again, err := b.resolveAll(ctx, part.Generation, part.Partition, []*goredis.SliceCmd{tx})
		if err != nil {
			return nil, err
		}
		if again {
			if try == maxResolves {
				return nil, partmap.Errorf(partmap.EUNAVAILABLE, "transactions kept pending on %s; retry", part.Partition)
			}
			continue
		}
		return parseIndexSets(sets.Val(), fields)
	}
}

// parseIndexSets reads indexentries.lua's reply: each existing set's
// position among the keys it was given (from 1), which fields names, then
// its members.
func parseIndexSets(reply any, fields []int) ([]engine.IndexEntry, error) {
	flat, ok := reply.([]any)
	if !ok || len(flat)%2 != 0 {
		return nil, fmt.Errorf("redis: index entries: unexpected reply %T", reply)
	}
	var out []engine.IndexEntry
	for i := 0; i < len(flat); i += 2 {
		pos, ok1 := flat[i].(int64)
		members, ok2 := flat[i+1].([]any)
		if !ok1 || !ok2 || pos < 1 || int(pos) > len(fields) {
			return nil, fmt.Errorf("redis: index entries: unexpected set %v", flat[i])
		}
		field := fields[pos-1]
		for _, v := range members {
			m, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("redis: index entries: a member of type %T", v)
			}
			if field >= engine.SearchFieldBase {
				value, email, ok := strings.Cut(m, "\x00")
				if !ok {
					value, email = "", m // reported as drift
				}
				out = append(out, engine.IndexEntry{Field: field, Value: value, Email: email})
				continue
			}
			e, ok := parseIndexMember(m)
			if !ok {
				e = engine.IndexEntry{Email: m} // reported as drift
			}
			e.Field = field
			out = append(out, e)
		}
	}
	return out, nil
}

// streamsOf is how many change feeds writes to parts need.
func streamsOf(parts []engine.Part) int {
	n := 0
	for _, p := range parts {
		n = max(n, int(p.Partition)+1)
	}
	return n
}

// Mark sets every partition's state in one pipeline per thousand. Marking
// a generation retired (a resize's switch, under the whole-map lock, before
// the next generation takes writes) also raises the change feeds' IDs past
// every event it wrote (raiseFloors).
func (b *backend) Mark(ctx context.Context, l engine.Layout, stage engine.Stage) error {
	for lo := 0; lo < l.Partitions; lo += 1000 {
		pipe := b.client.Pipeline()
		for p := lo; p < min(lo+1000, l.Partitions); p++ {
			pipe.Set(ctx, b.stateKey(engine.Part{Generation: l.Generation, Partition: partmap.Partition(p)}), string(stage), 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return unavailable(err)
		}
	}
	if stage == engine.StageRetired {
		return b.raiseFloors(ctx, l.Partitions)
	}
	return nil
}

// Drop deletes a generation's keys partition by partition, keeping each
// partition's mark for servers that have not noticed, and the change
// feeds, which every generation shares.
func (b *backend) Drop(ctx context.Context, l engine.Layout) error {
	for p := range partmap.Partition(l.Partitions) {
		part := engine.Part{Generation: l.Generation, Partition: p}
		// A transaction its committer left is ended first: rolled forward,
		// it may write another generation, which is not dropped.
		if err := b.finishPending(ctx, part); err != nil {
			return err
		}
		emails, err := b.client.ZRange(ctx, b.emailsKey(part), 0, -1).Result()
		if err != nil {
			return unavailable(err)
		}
		// Not the lock key: a whole-map lock may hold it (a resize starting
		// its copy over), and an old lock expires by itself.
		keys := []string{b.emailsKey(part), b.countKey(part)}
		for f := range engine.MaxSearchField + 1 {
			if f < engine.IndexFields || f >= engine.SearchFieldBase {
				keys = append(keys, b.indexKey(part, f))
			}
		}
		for _, e := range emails {
			keys = append(keys, b.recordKey(part, e))
		}
		// One slot per partition, so a multi-key DEL is fine on a cluster.
		for len(keys) > 0 {
			chunk := keys[:min(len(keys), 500)]
			keys = keys[len(chunk):]
			if err := b.client.Del(ctx, chunk...).Err(); err != nil {
				return unavailable(err)
			}
		}
	}
	return nil
}
