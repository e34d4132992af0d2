package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

// Transactions across partitions. One script cannot span the slots of a
// Redis Cluster, so a commit of several partitions is a protocol of
// single-slot scripts (DESIGN.md, "Transactions across partitions
// (Redis)"): under every partition's lock, the primary partition (the
// first in lock order) gets the transaction's record, "prepared", and
// every other partition a pending intent that holds its writes; the
// commit point is one script on the primary that turns the record to
// "committed" and applies the primary's writes; then each other
// partition is rolled forward, and the record goes. Whoever meets an
// intent resolves it first (resolve).

// txIDLen is the length of a transaction's id, which starts its intents.
const txIDLen = 32

// maxResolves bounds how many intents one read resolves before it gives
// up: each resolution ends a transaction, so more means a storm of them.
const maxResolves = 8

// intent is what a partition's pending key holds after the transaction's
// id: enough for anyone to end the transaction.
type intent struct {
	Token   string        `json:"t"`           // the committer's lock token
	Primary engine.Part   `json:"p"`           // where the record is
	Parts   []engine.Part `json:"ps"`          // every partition of the transaction, the primary first
	Writes  []partWrite   `json:"w,omitempty"` // this partition's writes (none on the primary)
}

func encodeIntent(txid string, in intent) string {
	v, err := json.Marshal(in)
	if err != nil {
		panic(err) // plain data
	}
	return txid + string(v)
}

func decodeIntent(v string) (string, intent, error) {
	var in intent
	if len(v) < txIDLen {
		return "", in, fmt.Errorf("redis: a pending intent of %d bytes", len(v))
	}
	if err := json.Unmarshal([]byte(v[txIDLen:]), &in); err != nil {
		return "", in, fmt.Errorf("redis: a pending intent: %w", err)
	}
	return v[:txIDLen], in, nil
}

// txHook, set by tests only, is called after each step of commitTx with
// the step's name, so that a test can stop the committer there.
var txHook atomic.Pointer[func(step string)]

func hook(step string) {
	if h := txHook.Load(); h != nil {
		(*h)(step)
	}
}

// Statuses of a transaction's record.
const (
	statusPrepared  = "prepared"
	statusCommitted = "committed"
	statusAborted   = "aborted"
)

// commitTx commits writes to several partitions, parts in lock order,
// atomically, under the locks of token.
func (b *backend) commitTx(ctx context.Context, token string, parts []engine.Part, byPart map[engine.Part][]engine.Write) error {
	raw := make([]byte, txIDLen/2)
	rand.Read(raw)
	txid := hex.EncodeToString(raw)
	primary, others := parts[0], parts[1:]
	txKey := b.txKey(primary, txid)
	ws := make(map[engine.Part][]partWrite, len(parts))
	for _, p := range parts {
		ws[p] = partWrites(byPart[p])
	}

	// 0. The hints of its partitions, before any intent, so that the
	// finisher finds whatever a committer that died here leaves.
	if err := b.addTxHints(ctx, token, parts); err != nil {
		return err
	}
	// abort ends the transaction before its commit point; its hints go
	// once nothing of it is left.
	abort := func() {
		if b.finishTx(context.WithoutCancel(ctx), txid, in0(token, primary, parts), true) == nil {
			b.hints.dropTx(token, parts)
		}
	}

	// 1. The record, "prepared", and the primary's intent, which marks it:
	// the two exist together, so that whoever touches the primary ends a
	// transaction its committer left.
	in := in0(token, primary, parts)
	if err := b.prepare(ctx, primary, "primary", token, accepts(byPart[primary]), txid, encodeIntent(txid, in), txKey, ws[primary]); err != nil {
		abort() // a WAIT short of replicas leaves a record
		return prepareError(primary, err)
	}
	hook("primary")

	// 2. Every other partition's intent, with its writes, in parallel.
	errs := make([]error, len(others))
	parallel(len(others), func(i int) {
		p := others[i]
		pin := intent{Token: token, Primary: primary, Parts: parts, Writes: ws[p]}
		errs[i] = b.prepare(ctx, p, "prepare", token, accepts(byPart[p]), txid, encodeIntent(txid, pin), "", ws[p])
	})
	for i, err := range errs {
		if err != nil {
			// Not committed: abort, and leave nothing behind.
			abort()
			return prepareError(others[i], err)
		}
	}
	hook("prepared")

	// 3. The commit point. A refusal means the transaction is not
	// committed: the lock was lost, and a resolver may have aborted it. A
	// commit point too few replicas acknowledged is applied, but a
	// failover may still lose it and the transaction then aborts: no
	// other partition may be rolled forward on it, so its outcome is
	// unknown, and the intents are left to resolvers, which roll forward
	// only once a replica has it (abort.lua, status.lua). A master none
	// of whose replicas lacks it cannot lose it to a failover.
	var notAcked error
	_, err := b.step(ctx, primary, "decide", token, "", txid, "", txKey, ws[primary])
	if scriptError(err) == "" {
		b.hints.noteWrites(primary, ws[primary])
	}
	if err != nil {
		switch {
		case scriptError(err) != "":
			abort()
			return commitError(primary, err)
		case errors.Is(err, errNoneBehind):
			notAcked = err // no replica lacks it: committed
		default:
			return &partmap.Error{Code: partmap.EUNAVAILABLE, Err: err,
				Message: fmt.Sprintf("the outcome of a write to %d partitions is unknown (%v); read before retrying", len(parts), err)}
		}
	}
	hook("decided")

	// 4. Roll the others forward. One that fails keeps its intent, which
	// the next to touch the partition rolls forward: the transaction is
	// committed whatever happens now.
	ctx = context.WithoutCancel(ctx)
	roll := func(p engine.Part) error {
		_, err := b.step(ctx, p, "roll", "", "", txid, "", b.fenceKey(p), ws[p])
		if scriptError(err) == "" {
			b.hints.noteWrites(p, ws[p])
		}
		if errors.Is(err, errNoneBehind) {
			return nil // no failover can lose it
		}
		return err
	}
	rolled := true
	if txHook.Load() != nil {
		for _, p := range others { // one at a time, so that a test can stop between two
			rolled = roll(p) == nil && rolled
			hook("rolled")
		}
	} else {
		errs := make([]error, len(others))
		parallel(len(others), func(i int) { errs[i] = roll(others[i]) })
		for _, err := range errs {
			rolled = err == nil && rolled
		}
	}

	// 5. The end: the primary's intent and the record go together, once no
	// other intent is left to need the record.
	if rolled {
		if _, err := b.run(ctx, dropScript, []string{b.pendingKey(primary), txKey}, []any{txid}); err == nil {
			b.hints.dropTx(token, parts) // nothing of it is left
		}
	}
	return notAcked
}

// in0 is a transaction's intent on its primary, which holds no writes.
func in0(token string, primary engine.Part, parts []engine.Part) intent {
	return intent{Token: token, Primary: primary, Parts: parts}
}

// behind reports a step that a replica could take over without: WAIT
// counted too few, and the master has a replica that lacks it. A
// failover may lose such a step, so nobody goes on from it.
func behind(err error) bool {
	return errors.Is(err, errFewReplicas) && !errors.Is(err, errNoneBehind)
}

// prepareError translates the failure of a prepare step, after which the
// transaction was aborted.
func prepareError(p engine.Part, err error) error {
	if errors.Is(err, errFewReplicas) {
		// Too few replicas acknowledged an intent: the transaction was
		// aborted, unlike a single commit that WAIT finds short.
		return partmap.Errorf(partmap.EUNAVAILABLE, "too few replicas acknowledged the write to %s; nothing was written, retry", p.Partition)
	}
	if scriptError(err) == "" {
		// Whether or not the step ran, the commit point did not: the
		// transaction is aborted, now or by whoever meets its intents.
		return unavailable(err)
	}
	return commitError(p, err)
}

// prepare runs a prepare step, resolving first an intent that a
// transaction left on the partition (its committer died: this one holds
// the lock now).
func (b *backend) prepare(ctx context.Context, p engine.Part, mode, token, accept, txid, in, txKey string, ws []partWrite) error {
	for try := 0; ; try++ {
		_, err := b.step(ctx, p, mode, token, accept, txid, in, txKey, ws)
		if scriptError(err) != "PARTMAP_PENDING" || try == maxResolves {
			return err
		}
		if _, err := b.settle(ctx, p); err != nil {
			return err
		}
	}
}

func parallel(n int, f func(i int)) {
	if n == 1 {
		f(0)
		return
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { f(i) })
	}
	wg.Wait()
}

// resolve deals with the intent that a read of part found, along with
// part's lock, in one atomic read. It returns inFlight when the
// transaction is in flight, its committer holding part's lock, and has
// not committed as far as that read goes: what the read found stands.
// Otherwise it has resolved the intent, and the caller reads again.
//
//   - On the primary, a live committer's records change only at the commit
//     point, in one step with the record's status: what one read finds
//     is a consistent state, before or after the commit.
//   - Elsewhere, the record says. "prepared": the read came before the
//     commit point, which is after this. "committed": the read may have
//     come after it, so the partition is rolled forward first.
//     "aborted", or no record (the transaction is over): the intent goes.
//   - A committer that no longer holds part's lock died (or stalled past
//     the lock's time to live): the transaction is ended, aborted if it
//     has not committed (finishTx).
func (b *backend) resolve(ctx context.Context, part engine.Part, raw, lock string) (inFlight bool, err error) {
	txid, in, err := decodeIntent(raw)
	if err != nil {
		return false, fmt.Errorf("%s: %w", part.Partition, err)
	}
	if lock != in.Token {
		return false, b.finishTx(ctx, txid, in, false)
	}
	if part == in.Primary {
		return true, nil
	}
	// A status is acted on only once a replica has it: statusScript
	// writes it again, and run's WAIT counts the replicas (finishTx).
	v, err := b.run(ctx, statusScript, []string{b.txKey(in.Primary, txid)}, nil)
	status, _ := v.(string)
	if err != nil && !errors.Is(err, errFewReplicas) {
		return false, unavailable(err)
	}
	if behind(err) && status != "" && status != statusPrepared {
		return false, unavailable(err) // "prepared" is acted on by nobody
	}
	switch status {
	case statusPrepared:
		return true, nil
	case statusCommitted:
		_, err = b.step(ctx, part, "roll", "", "", txid, "", b.fenceKey(part), in.Writes)
		if scriptError(err) == "" {
			b.hints.noteWrites(part, in.Writes)
		}
	default:
		_, err = b.run(ctx, dropScript, []string{b.pendingKey(part), b.pendingKey(part)}, []any{txid})
	}
	return false, unavailable(applied(err))
}

// settle resolves the intents pending on part until none is, or one is in
// flight (resolve).
func (b *backend) settle(ctx context.Context, part engine.Part) (inFlight bool, err error) {
	for try := 0; ; try++ {
		vals, err := b.client.MGet(ctx, b.pendingKey(part), b.lockKey(part)).Result()
		if err != nil {
			return false, unavailable(err)
		}
		raw, _ := vals[0].(string)
		if raw == "" {
			return false, nil
		}
		lock, _ := vals[1].(string)
		if inFlight, err := b.resolve(ctx, part, raw, lock); err != nil || inFlight {
			return inFlight, err
		}
		if try == maxResolves {
			return false, partmap.Errorf(partmap.EUNAVAILABLE, "transactions kept pending on %s; retry", part.Partition)
		}
	}
}

// finishTx ends a transaction from wherever its committer left it: one
// that has not reached its commit point is aborted, in one step on the
// primary that excludes the commit point; a committed one is rolled
// forward on every partition. Then its intents go, and with the
// primary's, the record. Every step checks the transaction's id, so it
// may run in any number of places at once.
//
// own is for the committer, ending its own transaction before its commit
// point: it will not commit, whatever a failover brings back.
func (b *backend) finishTx(ctx context.Context, txid string, in intent, own bool) error {
	txKey := b.txKey(in.Primary, txid)
	v, err := b.run(ctx, abortScript, []string{txKey}, nil)
	status, _ := v.(string)
	if err != nil && !errors.Is(err, errFewReplicas) {
		return unavailable(err)
	}
	if behind(err) && status != "" && !(own && status == statusAborted) {
		// Nothing is done on a status a replica lacks: a failover may
		// still turn a commit point, or an abort, back into "prepared"
		// under a lock that lets its committer go on.
		return unavailable(err)
	}
	short := false // a roll-forward a replica lacks
	for _, p := range in.Parts {
		if p == in.Primary {
			continue
		}
		if status != statusCommitted {
			// Aborted; or no record, so over (every intent has gone
			// before its record) or lost to a failover, which can only
			// abort it: the commit point needs the record.
			if _, err := b.run(ctx, dropScript, []string{b.pendingKey(p), b.pendingKey(p)}, []any{txid}); applied(err) != nil {
				return unavailable(err)
			}
			continue
		}
		raw, err := b.client.Get(ctx, b.pendingKey(p)).Result()
		if errors.Is(err, goredis.Nil) {
			raw, err = "", nil
		}
		if err != nil {
			return unavailable(err)
		}
		id, pin := "", intent{}
		if raw != "" {
			if id, pin, err = decodeIntent(raw); err != nil {
				return fmt.Errorf("%s: %w", p.Partition, err)
			}
		}
		if id != txid {
			// Rolled forward already (and maybe another transaction
			// came), perhaps by someone whose roll-forward no replica has
			// yet: the record stays until a fence proves one has.
			if b.acks > 0 {
				var v any
				v, err = b.run(ctx, fenceScript, []string{b.fenceKey(p), b.pendingKey(p)}, []any{txid})
				if n, ok := v.(int64); ok && n == 0 {
					// The intent is back (a failover): the next resolver
					// rolls it forward.
					short = true
				}
			}
		} else {
			_, err = b.step(ctx, p, "roll", "", "", txid, "", b.fenceKey(p), pin.Writes)
			if scriptError(err) == "" {
				b.hints.noteWrites(p, pin.Writes)
			}
		}
		if behind(err) {
			short = true
		} else if err != nil && !errors.Is(err, errFewReplicas) {
			return unavailable(err)
		}
	}
	if short {
		// A failover may lose the roll-forward and bring its intent back,
		// which needs the record to be rolled forward again: it stays.
		return partmap.Errorf(partmap.EUNAVAILABLE, "too few replicas acknowledged the end of a transaction on %s; retry", in.Primary.Partition)
	}
	_, err = b.run(ctx, dropScript, []string{b.pendingKey(in.Primary), txKey}, []any{txid})
	return unavailable(applied(err))
}

// applied forgives a resolution's step that too few replicas
// acknowledged where losing it to a failover is harmless: an intent
// dropped, or a partition rolled forward while the record stays, comes
// back and is ended again.
func applied(err error) error {
	if errors.Is(err, errFewReplicas) {
		return nil
	}
	return err
}

// finishPending ends the transaction pending on part, if any, whether or
// not its committer still holds the lock: for Drop, whose generation no
// one writes any more.
func (b *backend) finishPending(ctx context.Context, part engine.Part) error {
	raw, err := b.client.Get(ctx, b.pendingKey(part)).Result()
	if errors.Is(err, goredis.Nil) {
		return nil
	}
	if err != nil {
		return unavailable(err)
	}
	txid, in, err := decodeIntent(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", part.Partition, err)
	}
	return b.finishTx(ctx, txid, in, false)
}
