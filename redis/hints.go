package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

// Hints: where background work is (DESIGN.md, "Expiry" and "Transactions
// across partitions (Redis)"). A pass over every partition costs a
// command per partition on Redis, so the sweeper, the feed trimmer and
// the finisher read three small sorted sets instead, outside the
// partitions' slots:
//
//	partmap:NS:due          "G:P": partition P of generation G holds an expiry entry, scored by the soonest it holds, or earlier
//	partmap:NS:feedwritten  "P": partition number P's change feed was written at the score's time, and not trimmed since
//	partmap:NS:txs          "G:P:TOKEN": a transaction under lock token TOKEN may leave an intent on partition P of generation G, scored by when to look
//
// No script can write both a partition and a key outside its slot on a
// Redis Cluster, so a hint is written in a step of its own: a due hint,
// or a feed's, after the commit that needs it (a claimer takes a hint
// away before it reads the partition, so a hint written after the commit
// is never lost to a claim that read before it); a transaction's hints
// before its first intent (the finisher deletes one only once the
// partition's lock is not the committer's, after which no intent of it
// can appear). What a writer that died took with it, and what a failover
// or a restart lost of the sets, the backstop finds: a slow pass over
// every partition, at a fixed rate whatever the partition count.

func (b *backend) dueHintsKey() string  { return "partmap:" + b.ns + ":due" }
func (b *backend) feedHintsKey() string { return "partmap:" + b.ns + ":feedwritten" }
func (b *backend) txHintsKey() string   { return "partmap:" + b.ns + ":txs" }

var (
	claimScript    = script("claim")
	unclaimScript  = script("unclaim")
	backstopScript = script("backstop")
)

const (
	// hintFlush is how often a server writes the hints of its commits:
	// what it writes is due by then at the latest, or is a feed to trim.
	hintFlush = 250 * time.Millisecond
	// claimLease is how long a claim stays its claimer's: a claimer that
	// died delays its partitions' work by as much.
	claimLease = 10 * time.Second
	// skipDelay is how long a partition a sweeper skipped (of a
	// generation it does not serve) waits before it is claimed again.
	skipDelay = 10 * time.Second
	// claimParts bounds the partitions one claim takes; dueEntries the
	// entries one claim reads, shared between its partitions.
	claimParts = 256
	dueEntries = 50000
	// DefaultBackstopRate is how many partitions a second the backstop
	// reads.
	DefaultBackstopRate = 4
)

// hinter keeps the hints of this server's commits until its next flush.
type hinter struct {
	b    *backend
	mu   sync.Mutex
	due  map[string]int64 // base: the soonest deadline
	feed map[string]int64 // base: the first write since the last flush
	gone []string         // transaction hints to delete
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func newHinter(b *backend) *hinter {
	return &hinter{b: b, due: map[string]int64{}, feed: map[string]int64{}, stop: make(chan struct{}), done: make(chan struct{})}
}

func dueBase(p engine.Part) string {
	return strconv.Itoa(p.Generation) + ":" + strconv.Itoa(int(p.Partition))
}

func parseDueBase(s string) (engine.Part, bool) {
	g, p, ok := strings.Cut(s, ":")
	gen, err1 := strconv.Atoi(g)
	n, err2 := strconv.Atoi(p)
	if !ok || err1 != nil || err2 != nil || gen < 0 || n < 0 || n >= 1<<31 {
		return engine.Part{}, false
	}
	return engine.Part{Generation: gen, Partition: partmap.Partition(n)}, true
}

// noteWrites records the hints that writes applied to p need: a due hint
// for every expiry entry they add, and p's feed, written.
func (h *hinter) noteWrites(p engine.Part, ws []partWrite) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range ws {
		if len(w.Head) > 0 && h.b.trims() {
			lower(h.feed, strconv.Itoa(int(p.Partition)), time.Now().UnixMilli())
		}
		for _, x := range w.Index {
			if !x.Add || x.Field != engine.ExpiryField {
				continue
			}
			if e, ok := parseIndexMember(string(x.Member)); ok {
				if at, _, ok := engine.ParseExpiryValue(e.Value); ok {
					lower(h.due, dueBase(p), at)
				}
			}
		}
	}
}

func (h *hinter) noteDue(base string, at int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	lower(h.due, base, at)
}

func (h *hinter) noteFeed(p partmap.Partition, at int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	lower(h.feed, strconv.Itoa(int(p)), at)
}

// lower sets m[k] to v unless it holds a lesser value already.
func lower(m map[string]int64, k string, v int64) {
	if old, ok := m[k]; !ok || v < old {
		m[k] = v
	}
}

// dropTx records that the transaction under token left nothing on parts.
func (h *hinter) dropTx(token string, parts []engine.Part) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range parts {
		h.gone = append(h.gone, txHint(p, token))
	}
}

// flush writes the hints noted since the last flush, in one pipeline: a
// hint keeps the earlier score where one is there already (ZADD LT). What
// a failure did not write is noted again, for the next flush.
func (h *hinter) flush(ctx context.Context) error {
	h.mu.Lock()
	due, feed, gone := h.due, h.feed, h.gone
	if len(due) == 0 && len(feed) == 0 && len(gone) == 0 {
		h.mu.Unlock()
		return nil
	}
	h.due, h.feed, h.gone = map[string]int64{}, map[string]int64{}, nil
	h.mu.Unlock()
	b := h.b
	pipe := b.client.Pipeline()
	zadd := func(key string, m map[string]int64) {
		if len(m) == 0 {
			return
		}
		zs := make([]goredis.Z, 0, len(m))
		for base, at := range m {
			zs = append(zs, goredis.Z{Score: float64(at), Member: base})
		}
		pipe.ZAddArgs(ctx, key, goredis.ZAddArgs{LT: true, Members: zs})
	}
	zadd(b.dueHintsKey(), due)
	zadd(b.feedHintsKey(), feed)
	if len(gone) > 0 {
		members := make([]any, len(gone))
		for i, m := range gone {
			members[i] = m
		}
		pipe.ZRem(ctx, b.txHintsKey(), members...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		h.mu.Lock()
		for base, at := range due {
			lower(h.due, base, at)
		}
		for base, at := range feed {
			lower(h.feed, base, at)
		}
		h.gone = append(h.gone, gone...)
		h.mu.Unlock()
		return unavailable(err)
	}
	return nil
}

// run flushes every hintFlush until close.
func (h *hinter) run() {
	defer close(h.done)
	t := time.NewTicker(hintFlush)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			h.flush(ctx) // what this fails to write, the backstop finds
			cancel()
			return
		case <-t.C:
			h.flush(context.Background())
		}
	}
}

// close flushes once more and stops.
func (h *hinter) close() {
	h.once.Do(func() { close(h.stop) })
	<-h.done
}

func newToken() string {
	raw := make([]byte, 16)
	rand.Read(raw)
	return hex.EncodeToString(raw)
}

// claim claims the members of the hint set key due at now (claim.lua).
func (b *backend) claim(ctx context.Context, key string, now int64, token string, limit int) ([]string, error) {
	v, err := claimScript.Run(ctx, b.client, []string{key}, now, now+claimLease.Milliseconds(), token, limit).StringSlice()
	if err != nil {
		return nil, unavailable(err)
	}
	return v, nil
}

// release releases claims (unclaim.lua): scores[i] is what bases[i] comes
// back with, "" for nothing.
func (b *backend) release(ctx context.Context, key, token string, bases, scores []string) error {
	if len(bases) == 0 {
		return nil
	}
	args := make([]any, 0, 1+2*len(bases))
	args = append(args, token)
	for i, base := range bases {
		args = append(args, base, scores[i])
	}
	return unavailable(unclaimScript.Run(ctx, b.client, []string{key}, args...).Err())
}

// expiryMin is the least member of a partition's expiry entries, for
// ZRANGEBYLEX: every one has a value of the same length.
func expiryMin() string { return "[" + valuePrefix(engine.ExpiryValue(0, false))[:4] }

func parseExpiryMember(m string) (engine.Due, bool) {
	e, ok := parseIndexMember(m)
	at, profile, ok2 := engine.ParseExpiryValue(e.Value)
	return engine.Due{Email: e.Email, Deadline: at, Profile: profile}, ok && ok2
}

// ClaimDue claims the due hints (claim.lua) and reads, in one pipeline,
// the entries due of each partition claimed.
func (b *backend) ClaimDue(ctx context.Context, before int64) (engine.DueClaim, error) {
	// This server's own hints first: a sweep at once after a write sees it.
	if err := b.hints.flush(ctx); err != nil {
		return engine.DueClaim{}, err
	}
	c := engine.DueClaim{Token: newToken(), Before: before}
	bases, err := b.claim(ctx, b.dueHintsKey(), before-1, c.Token, claimParts)
	if err != nil || len(bases) == 0 {
		return c, err
	}
	var bad []string
	for _, base := range bases {
		if p, ok := parseDueBase(base); ok {
			c.Parts = append(c.Parts, p)
		} else {
			bad = append(bad, base)
		}
	}
	if len(bad) > 0 { // not partmap's: dropped
		if err := b.release(ctx, b.dueHintsKey(), c.Token, bad, make([]string, len(bad))); err != nil {
			return c, err
		}
	}
	if len(c.Parts) == 0 {
		return c, nil
	}
	page := max(200, dueEntries/len(c.Parts))
	hi := "(" + expiryMin()[1:] + engine.ExpiryBound(before)
	pipe := b.client.Pipeline()
	cmds := make([]*goredis.StringSliceCmd, len(c.Parts))
	for i, p := range c.Parts {
		cmds[i] = pipe.ZRangeByLex(ctx, b.indexKey(p, engine.ExpiryField), &goredis.ZRangeBy{Min: expiryMin(), Max: hi, Count: int64(page)})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		// The claims run out by themselves.
		return engine.DueClaim{}, unavailable(err)
	}
	c.Due = make([][]engine.Due, len(c.Parts))
	for i, cmd := range cmds {
		for _, m := range cmd.Val() {
			e, ok := parseExpiryMember(m)
			if !ok {
				return engine.DueClaim{}, fmt.Errorf("redis: malformed expiry entry %q", m)
			}
			e.Partition = c.Parts[i].Partition
			c.Due[i] = append(c.Due[i], e)
		}
		c.More = c.More || len(cmd.Val()) == page
	}
	return c, nil
}

// ReleaseDue reads each claimed partition's soonest expiry entry, in one
// pipeline, and brings its hint back with it (unclaim.lua).
func (b *backend) ReleaseDue(ctx context.Context, c engine.DueClaim, skipped []engine.Part) error {
	if len(c.Parts) == 0 {
		return nil
	}
	pipe := b.client.Pipeline()
	cmds := make([]*goredis.StringSliceCmd, len(c.Parts))
	for i, p := range c.Parts {
		cmds[i] = pipe.ZRangeByLex(ctx, b.indexKey(p, engine.ExpiryField), &goredis.ZRangeBy{Min: expiryMin(), Max: "+", Count: 1})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return unavailable(err)
	}
	later := map[engine.Part]bool{}
	for _, p := range skipped {
		later[p] = true
	}
	bases, scores := make([]string, len(c.Parts)), make([]string, len(c.Parts))
	for i, p := range c.Parts {
		bases[i] = dueBase(p)
		if v := cmds[i].Val(); len(v) > 0 {
			e, ok := parseExpiryMember(v[0])
			if !ok {
				return fmt.Errorf("redis: malformed expiry entry %q", v[0])
			}
			at := e.Deadline
			if later[p] {
				at = max(at, c.Before+skipDelay.Milliseconds())
			}
			scores[i] = strconv.FormatInt(at, 10)
		}
	}
	return b.release(ctx, b.dueHintsKey(), c.Token, bases, scores)
}

// TrimWritten trims the feeds whose hints are due (written, or found
// aged by the backstop), with the script TrimFeed runs on every one, and
// brings back the hint of one that a run left too long.
func (b *backend) TrimWritten(ctx context.Context, before int64, keep int64) (partmap.FeedStats, error) {
	if err := b.hints.flush(ctx); err != nil {
		return partmap.FeedStats{}, err
	}
	token := newToken()
	bases, err := b.claim(ctx, b.feedHintsKey(), time.Now().UnixMilli(), token, 10_000)
	if err != nil {
		return partmap.FeedStats{}, err
	}
	var streams []int
	var bad []string
	for _, base := range bases {
		if q, err := strconv.Atoi(base); err == nil && q >= 0 {
			streams = append(streams, q)
		} else {
			bad = append(bad, base)
		}
	}
	if len(bad) > 0 {
		if err := b.release(ctx, b.feedHintsKey(), token, bad, make([]string, len(bad))); err != nil {
			return partmap.FeedStats{}, err
		}
	}
	if len(streams) > 0 {
		s, err := b.feedStreams(ctx)
		if err != nil {
			return partmap.FeedStats{}, err
		}
		per, left, err := b.trimStreams(ctx, s, streams, before, keep)
		if err != nil {
			return partmap.FeedStats{}, err // the claims run out by themselves
		}
		rel, scores := make([]string, len(streams)), make([]string, len(streams))
		now := strconv.FormatInt(time.Now().UnixMilli(), 10)
		for i, q := range streams {
			rel[i] = strconv.Itoa(q)
			if per > 0 && left[i] > per {
				scores[i] = now // a run's most: the next trim goes on
			}
		}
		if err := b.release(ctx, b.feedHintsKey(), token, rel, scores); err != nil {
			return partmap.FeedStats{}, err
		}
	}
	return b.feedTotals(), nil
}

// streamStat is what a stream held at its last trim, or the backstop's
// last look.
type streamStat struct {
	events int64
	first  int64 // the first entry's time, Unix ms; 0 when empty
}

// noteStream records what stream q holds.
func (b *backend) noteStream(q int, events int64, firstID string) {
	st := streamStat{events: events}
	if ms, _, ok := parseID(firstID); ok {
		st.first = int64(ms)
	}
	b.feedMu.Lock()
	defer b.feedMu.Unlock()
	if b.feedStats == nil {
		b.feedStats = map[int]streamStat{}
	}
	b.feedStats[q] = st
}

// feedTotals describes the feed as of every stream's last trim or look.
func (b *backend) feedTotals() partmap.FeedStats {
	b.feedMu.Lock()
	defer b.feedMu.Unlock()
	var st partmap.FeedStats
	for _, s := range b.feedStats {
		st.Events += s.events
		if s.first != 0 && (st.Oldest == 0 || s.first < st.Oldest) {
			st.Oldest = s.first
		}
	}
	return st
}

// trims says whether this directory's feed is bounded at all: a feed kept
// whole is never trimmed, and needs no hints.
func (b *backend) trims() bool { return b.retention.Age > 0 || b.retention.Events > 0 }

func txHint(p engine.Part, token string) string { return dueBase(p) + ":" + token }

// addTxHints writes, before a transaction's first intent, a hint of each
// of its partitions, scored by when the finisher should look: once the
// committer's locks would have run out, had it died at once.
func (b *backend) addTxHints(ctx context.Context, token string, parts []engine.Part) error {
	at := float64(time.Now().Add(b.ttl).UnixMilli())
	zs := make([]goredis.Z, len(parts))
	for i, p := range parts {
		zs[i] = goredis.Z{Score: at, Member: txHint(p, token)}
	}
	return unavailable(b.client.ZAdd(ctx, b.txHintsKey(), zs...).Err())
}

// finishHinted ends the transactions that the due hints of txs point to
// and whose committer no longer holds the partition's lock (it died, or
// stalled past the lock's time to live), and deletes each hint whose
// partition holds no intent of its transaction while its lock is not the
// committer's: no intent of that transaction can appear there after that,
// since a prepare needs the lock. A hint whose committer still holds the
// lock is looked at again at the next call.
func (b *backend) finishHinted(ctx context.Context) error {
	members, err := b.client.ZRangeByScore(ctx, b.txHintsKey(), &goredis.ZRangeBy{
		Min: "-inf", Max: strconv.FormatInt(time.Now().UnixMilli(), 10), Count: 1000}).Result()
	if err != nil || len(members) == 0 {
		return unavailable(err)
	}
	type hint struct {
		member string
		part   engine.Part
		token  string
		cmd    *goredis.SliceCmd
	}
	var hints []hint
	var gone []any
	pipe := b.client.Pipeline()
	for _, m := range members {
		i := strings.LastIndexByte(m, ':')
		part, ok := parseDueBase(m[:max(i, 0)])
		if i < 0 || !ok {
			gone = append(gone, m) // not partmap's
			continue
		}
		hints = append(hints, hint{member: m, part: part, token: m[i+1:],
			cmd: pipe.MGet(ctx, b.pendingKey(part), b.lockKey(part))})
	}
	if len(hints) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return unavailable(err)
		}
	}
	settled := map[engine.Part]bool{}
	var failed error
	for _, h := range hints {
		vals := h.cmd.Val()
		if len(vals) != 2 {
			continue
		}
		raw, _ := vals[0].(string)
		lock, _ := vals[1].(string)
		if raw != "" {
			_, in, err := decodeIntent(raw)
			if err == nil && lock != in.Token {
				// Abandoned, this transaction's or another's: ended now,
				// and the hint looked at again next time.
				if !settled[h.part] {
					settled[h.part] = true
					if _, err := b.settle(ctx, h.part); err != nil {
						failed = cmpErr(failed, err)
					}
				}
				continue
			}
			if err == nil && in.Token == h.token {
				continue // its committer is at work
			}
		}
		if lock == h.token {
			continue // its committer holds the lock: it may prepare yet
		}
		gone = append(gone, h.member)
	}
	if len(gone) > 0 {
		if err := b.client.ZRem(ctx, b.txHintsKey(), gone...).Err(); err != nil {
			return unavailable(err)
		}
	}
	return failed
}

func cmpErr(old, err error) error {
	if old != nil {
		return old
	}
	return err
}

// backstop looks at partition numbers ps of every layout in layouts (one
// script each, backstop.lua), for what a lost hint would hide: it writes
// the due hint of each partition with an expiry entry, and the feed hint
// of each stream that holds more than its share of the retention or
// something older than it, and ends a transaction whose committer left
// it.
func (b *backend) backstop(ctx context.Context, layouts []engine.Layout, ps []int) error {
	before := int64(0)
	if b.retention.Age > 0 {
		before = b.now().Add(-b.retention.Age).UnixMilli()
	}
	var per int64
	if s := b.streams.Load(); b.retention.Events > 0 {
		per = max(1, (b.retention.Events+s-1)/max(1, s))
	}
	parts := make([][]engine.Part, len(ps))
	cmds, err := b.pipeScript(ctx, backstopScript, len(ps), func(i int) ([]string, []any) {
		q := partmap.Partition(ps[i])
		keys := []string{b.feedKey(q)}
		parts[i] = parts[i][:0]
		for _, l := range layouts {
			if int(q) < l.Partitions {
				part := engine.Part{Generation: l.Generation, Partition: q}
				parts[i] = append(parts[i], part)
				keys = append(keys, b.indexKey(part, engine.ExpiryField), b.pendingKey(part), b.lockKey(part))
			}
		}
		return keys, []any{expiryMin()}
	})
	if err != nil {
		return err
	}
	var failed error
	now := time.Now().UnixMilli()
	for i, c := range cmds {
		r, _ := c.Val().([]any)
		if len(r) != 2+3*len(parts[i]) {
			return fmt.Errorf("redis: the backstop of %s: unexpected reply %v", partmap.Partition(ps[i]), c.Val())
		}
		n, _ := r[0].(int64)
		first, _ := r[1].(string)
		b.noteStream(ps[i], n, first)
		if ms, _, ok := parseID(first); ok && b.trims() && (int64(ms) < before || per > 0 && n > per) {
			b.hints.noteFeed(partmap.Partition(ps[i]), now)
		}
		for j, part := range parts[i] {
			soonest, _ := r[2+3*j].(string)
			raw, _ := r[3+3*j].(string)
			lock, _ := r[4+3*j].(string)
			if e, ok := parseExpiryMember(soonest); ok {
				b.hints.noteDue(dueBase(part), e.Deadline)
			}
			if raw == "" {
				continue
			}
			if _, in, err := decodeIntent(raw); err == nil && lock == in.Token {
				continue // its committer is at work
			}
			if _, err := b.settle(ctx, part); err != nil {
				failed = cmpErr(failed, err)
			}
		}
	}
	return failed
}

// backstop runs b.backstop over every partition number: once at once, a
// hundred a round trip, since a server that starts may be one that died
// with hints unwritten; then rate a second, round after round,
// starting at a random one so that servers sharing the Redis look at
// different ones, until ctx ends.
func (s *Store) backstop(ctx context.Context, b *backend, rate int) {
	defer s.wg.Done()
	partitions := func() ([]engine.Layout, int) {
		layouts := *b.serving.Load()
		n := int(b.streams.Load())
		for _, l := range layouts {
			n = max(n, l.Partitions)
		}
		return layouts, n
	}
	layouts, n := partitions()
	for lo := 0; lo < n && ctx.Err() == nil; lo += 100 {
		ps := make([]int, 0, 100)
		for q := lo; q < min(lo+100, n); q++ {
			ps = append(ps, q)
		}
		b.backstop(ctx, layouts, ps) // a failure is the slow rounds' to make up
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	next := -1
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		layouts, n := partitions()
		if n == 0 {
			continue
		}
		if next < 0 {
			next = mrand.IntN(n)
		}
		ps := make([]int, 0, rate)
		for range min(rate, n) {
			next = (next + 1) % n
			ps = append(ps, next)
		}
		// A failure is the next round's to retry.
		b.backstop(ctx, layouts, ps)
	}
}
