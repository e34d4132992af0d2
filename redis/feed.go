package redis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
	"github.com/partmap/partmap/internal/record"
)

// The change feed is one Redis Stream per partition number, shared by
// every generation that has that partition (DESIGN.md, "The change feed on
// Redis"):
//
//	{partition-NNN}:NS:feed      the events of partition NNN, whatever the generation
//	{partition-NNN}:NS:feedcut   the ID of the newest event a trim deleted
//	partmap:NS:feedstreams       how many feeds there are: the most partitions any generation had
//
// The commit script appends a write's event (XADD *) in the step that
// applies the write, so an event's ID is its commit time and its
// partition's order. The feed's order is (ms, partition, seq), where ms-seq
// is the stream ID. A reader reads every stream with the server's time in
// one step, and shows only events up to the horizon, one millisecond
// before the earliest of those times: any event appended later gets a
// later ID. A cursor is "ms-partition-seq", the last event returned, or
// "ms", the horizon, after which no event was returned.

func (b *backend) feedKey(p partmap.Partition) string {
	return "{" + p.String() + "}:" + b.ns + ":feed"
}

func (b *backend) feedCutKey(p partmap.Partition) string {
	return "{" + p.String() + "}:" + b.ns + ":feedcut"
}

func (b *backend) feedStreamsKey() string { return "partmap:" + b.ns + ":feedstreams" }

var (
	feedReadScript    = script("feedread")
	feedTrimScript    = script("feedtrim")
	feedFloorScript   = script("feedfloor")
	feedStreamsScript = script("feedstreams")
)

// feedTrimRun bounds the events one trim deletes from one stream to keep
// a count, so that a script stays short; the next trim goes on.
const feedTrimRun = 10_000

// ensureStreams records that there are at least n feeds, before a write
// to partition n-1 can append to one: Open raises it to the layout's
// partitions, and a resize's switch, which locks every partition of the
// next generation, to the next one's (Lock), so that a commit seldom needs
// to (a server that learned a new layout). One caller at a time raises it,
// and the others find it raised.
func (b *backend) ensureStreams(ctx context.Context, n int) error {
	if int64(n) <= b.streams.Load() {
		return nil
	}
	b.streamsMu.Lock()
	defer b.streamsMu.Unlock()
	if int64(n) <= b.streams.Load() {
		return nil
	}
	got, err := feedStreamsScript.Run(ctx, b.client, []string{b.feedStreamsKey()}, n).Int64()
	if err != nil {
		return unavailable(err)
	}
	b.raiseStreams(got)
	return nil
}

func (b *backend) raiseStreams(n int64) {
	for {
		old := b.streams.Load()
		if n <= old || b.streams.CompareAndSwap(old, n) {
			return
		}
	}
}

// feedStreams reads how many feeds there are.
func (b *backend) feedStreams(ctx context.Context) (int, error) {
	v, err := b.client.Get(ctx, b.feedStreamsKey()).Int64()
	if errors.Is(err, goredis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, unavailable(err)
	}
	b.raiseStreams(v)
	return int(v), nil
}

// position is a place in the feed's order.
type position struct {
	ms  uint64
	p   uint32
	seq uint64
}

func (a position) compare(c position) int {
	return cmp.Or(cmp.Compare(a.ms, c.ms), cmp.Compare(a.p, c.p), cmp.Compare(a.seq, c.seq))
}

// afterMs is the position after every event of millisecond ms: a
// horizon cursor's.
func afterMs(ms uint64) position { return position{ms, math.MaxUint32, math.MaxUint64} }

func (a position) cursor() string {
	if a.p == math.MaxUint32 {
		return strconv.FormatUint(a.ms, 10)
	}
	return fmt.Sprintf("%d-%d-%d", a.ms, a.p, a.seq)
}

// parseCursor reads what cursor wrote, exactly: no sign, no leading zero.
func parseCursor(s string) (position, error) {
	bad := &partmap.Error{Code: partmap.EINVALID, Field: "after", Message: fmt.Sprintf("%q is not a change feed cursor of this store", s)}
	parts := strings.Split(s, "-")
	if len(parts) != 1 && len(parts) != 3 {
		return position{}, bad
	}
	var n [3]uint64
	for i, x := range parts {
		v, err := strconv.ParseUint(x, 10, 64)
		if err != nil || strconv.FormatUint(v, 10) != x {
			return position{}, bad
		}
		n[i] = v
	}
	if n[0] == 0 || n[0] > 1<<53 {
		return position{}, bad
	}
	if len(parts) == 1 {
		return afterMs(n[0]), nil
	}
	if n[1] >= math.MaxUint32 {
		return position{}, bad
	}
	return position{n[0], uint32(n[1]), n[2]}, nil
}

// parseID reads a stream ID, "ms-seq".
func parseID(id string) (ms, seq uint64, ok bool) {
	a, c, found := strings.Cut(id, "-")
	if !found {
		return 0, 0, false
	}
	ms, err1 := strconv.ParseUint(a, 10, 64)
	seq, err2 := strconv.ParseUint(c, 10, 64)
	return ms, seq, err1 == nil && err2 == nil
}

// start is the first stream ID of partition q's feed after position c,
// inclusive.
func (c position) start(q uint32) (ms, seq uint64) {
	switch {
	case q < c.p:
		return c.ms + 1, 0
	case q > c.p:
		return c.ms, 0
	case c.seq == math.MaxUint64:
		return c.ms + 1, 0
	}
	return c.ms, c.seq + 1
}

// aheadTolerance is how far (ms) a cursor may be ahead of the horizon
// before it is refused as not this store's: the horizon may step back a
// little after a failover to a replica whose clock is behind.
const aheadTolerance = 60_000

// streamPage is what the read script returned for one stream.
type streamPage struct {
	timeMs uint64
	cut    string
	events []engine.Event
	pos    []position
}

// clockWait bounds how long a read waits for every master's clock to
// pass the latest of them. Masters whose clocks differ by more show the
// changes of the one ahead that much later anyway.
const clockWait = 50 * time.Millisecond

func (b *backend) Feed(ctx context.Context, after string, limit int) (engine.FeedPage, error) {
	var from *position // nil: from the oldest kept
	switch after {
	case "":
	case partmap.FeedNow:
		now, err := b.feedNow(ctx)
		return engine.FeedPage{Next: now, End: true}, err
	default:
		c, err := parseCursor(after)
		if err != nil {
			return engine.FeedPage{}, err
		}
		from = &c
	}
	limit = max(limit, 1)
	s := int(b.streams.Load())
	if s == 0 {
		var err error
		if s, err = b.feedStreams(ctx); err != nil {
			return engine.FeedPage{}, err
		}
	}
	if s == 0 {
		return engine.FeedPage{Next: after, End: true}, nil // nothing was ever written
	}
	// Every event appended before the call has an ID at or before the
	// latest of the masters' clocks now (unless ahead of its own master's:
	// see feedPage). Read once every clock has passed it, the horizon has
	// too, so a page that holds everything up to its horizon is the end,
	// and a caught-up reader needs no second read to be sure of it.
	appended, err := b.clocksPast(ctx)
	if err != nil {
		return engine.FeedPage{}, err
	}
	for try := 0; ; try++ {
		count := min(limit, max(16, 4*limit/s))
		pages, err := b.readStreams(ctx, s, from, count)
		if err != nil {
			return engine.FeedPage{}, err
		}
		// A write to a partition past those read records the new number of
		// feeds first: read after the streams, an unchanged number means
		// that any such write comes after the reads, and past the horizon.
		now, err := b.feedStreams(ctx)
		if err != nil {
			return engine.FeedPage{}, err
		}
		if now > s {
			if try == 3 {
				return engine.FeedPage{}, partmap.Errorf(partmap.EUNAVAILABLE, "the change feed's partitions kept growing; retry")
			}
			s = now
			continue
		}
		return b.feedPage(pages, from, after, count, limit, appended)
	}
}

// clocksPast returns the latest of the masters' clocks (Unix ms) once
// every master's clock has passed it: a millisecond or less, unless they
// differ by more than clockWait, which it waits at most.
func (b *backend) clocksPast(ctx context.Context) (uint64, error) {
	lo, hi, err := b.masterClocks(ctx)
	if err != nil {
		return 0, err
	}
	latest := hi / 1000
	t := time.NewTimer(min(clockWait, time.Duration((latest+1)*1000-lo)*time.Microsecond))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-t.C:
	}
	return latest, nil
}

// feedNow is the cursor of "from now on": the latest time of the masters,
// once every master's clock has passed it. Every event up to it was
// appended before the call returned, and every later one gets a later
// ID. If the clocks do not get there (a master's clock far behind), the
// cursor is the horizon instead, which may leave a few earlier changes
// after it: delivery is at least once.
func (b *backend) feedNow(ctx context.Context) (string, error) {
	lo, hi, err := b.masterTimes(ctx)
	if err != nil {
		return "", err
	}
	for range 50 {
		if lo > hi {
			return afterMs(hi).cursor(), nil
		}
		time.Sleep(time.Millisecond)
		if lo, _, err = b.masterTimes(ctx); err != nil {
			return "", err
		}
	}
	return afterMs(lo - 1).cursor(), nil
}

// feedPage merges the streams' pages into the feed's order, up to the
// horizon, and to the last event read of each stream read to its count:
// what that stream holds beyond it was not read. The page is the end when
// it holds everything up to the horizon and no event left past it may
// have been appended before the call: none in a millisecond at or before
// appended (the latest of the masters' clocks before the read), none
// ahead of its own master's clock (a floor, a clock stepped back).
func (b *backend) feedPage(pages []streamPage, from *position, after string, count, limit int, appended uint64) (engine.FeedPage, error) {
	var horizon uint64 = math.MaxUint64
	for _, pg := range pages {
		horizon = min(horizon, pg.timeMs-1)
	}
	bound, whole := afterMs(horizon), true
	for _, pg := range pages {
		if len(pg.pos) == count {
			if last := pg.pos[len(pg.pos)-1]; last.compare(bound) < 0 {
				bound, whole = last, false
			}
		}
	}
	if from != nil && from.ms > horizon+aheadTolerance {
		return engine.FeedPage{}, &partmap.Error{Code: partmap.EINVALID, Field: "after",
			Message: fmt.Sprintf("cursor %s is ahead of the change feed; it was not issued by this store", after)}
	}
	// Checked after reading, in the same step as each stream's read: a
	// trim deletes and records its cut together.
	if from != nil {
		for q, pg := range pages {
			if pg.cut == "" {
				continue
			}
			ms, seq, ok := parseID(pg.cut)
			if !ok {
				return engine.FeedPage{}, fmt.Errorf("redis: malformed feed cut %q of %s", pg.cut, partmap.Partition(q))
			}
			sms, sseq := from.start(uint32(q))
			if ms > sms || (ms == sms && seq >= sseq) {
				return engine.FeedPage{}, &partmap.Error{Code: partmap.ECURSOREXPIRED, Field: "after",
					Message: fmt.Sprintf("the change feed no longer holds the changes after cursor %s (retention); start again from a full listing or an export", after)}
			}
		}
	}
	type item struct {
		pos position
		ev  engine.Event
	}
	var all []item
	late := false
	for _, pg := range pages {
		for i, p := range pg.pos {
			if p.compare(bound) <= 0 {
				all = append(all, item{p, pg.events[i]})
			} else if p.ms <= appended || p.ms > pg.timeMs {
				late = true
			}
		}
	}
	slices.SortFunc(all, func(a, c item) int { return a.pos.compare(c.pos) })
	if len(all) > limit {
		all, whole = all[:limit], false
	}
	out := make([]engine.Event, len(all))
	next := after
	var last *position = from
	for i, it := range all {
		out[i] = it.ev
		next, last = it.ev.Cursor, &all[i].pos
	}
	// Everything up to the horizon returned: the cursor moves on to it,
	// but never back.
	if h := afterMs(horizon); whole && (last == nil || h.compare(*last) > 0) {
		next = h.cursor()
	}
	return engine.FeedPage{Events: out, Next: next, End: whole && !late}, nil
}

// readStreams runs the read script on every stream.
func (b *backend) readStreams(ctx context.Context, s int, from *position, count int) ([]streamPage, error) {
	cmds, err := b.pipeScript(ctx, feedReadScript, s, func(q int) ([]string, []any) {
		start := "-"
		if from != nil {
			ms, seq := from.start(uint32(q))
			start = fmt.Sprintf("%d-%d", ms, seq)
		}
		return []string{b.feedKey(partmap.Partition(q)), b.feedCutKey(partmap.Partition(q))}, []any{start, count}
	})
	if err != nil {
		return nil, err
	}
	pages := make([]streamPage, s)
	for q, c := range cmds {
		pg, err := parseStreamPage(uint32(q), c.Val())
		if err != nil {
			return nil, fmt.Errorf("redis: feed of %s: %w", partmap.Partition(q), err)
		}
		pages[q] = pg
	}
	return pages, nil
}

func parseStreamPage(q uint32, v any) (streamPage, error) {
	var pg streamPage
	r, ok := v.([]any)
	if !ok || len(r) != 4 {
		return pg, fmt.Errorf("unexpected reply %T", v)
	}
	sec, err1 := strconv.ParseUint(fmt.Sprint(r[0]), 10, 64)
	usec, err2 := strconv.ParseUint(fmt.Sprint(r[1]), 10, 64)
	if err1 != nil || err2 != nil {
		return pg, fmt.Errorf("unexpected time %v %v", r[0], r[1])
	}
	pg.timeMs = sec*1000 + usec/1000
	pg.cut, _ = r[2].(string)
	entries, _ := r[3].([]any)
	for _, e := range entries {
		entry, ok := e.([]any)
		if !ok || len(entry) != 2 {
			return pg, fmt.Errorf("unexpected entry %v", e)
		}
		id, _ := entry[0].(string)
		fields, _ := entry[1].([]any)
		ms, seq, ok := parseID(id)
		if !ok || len(fields) != 2 {
			return pg, fmt.Errorf("unexpected entry %q", id)
		}
		raw, _ := fields[1].(string)
		op, email, rec, err := record.DecodeEventHead([]byte(raw))
		if err != nil {
			return pg, fmt.Errorf("event %s: %w", id, err)
		}
		if rec != nil {
			rec.Committed = int64(ms) // the stored record ends with it; the event's copy has its ID
		}
		p := position{ms, q, seq}
		pg.pos = append(pg.pos, p)
		pg.events = append(pg.events, engine.Event{Cursor: p.cursor(), Time: int64(ms), Op: op, Email: email, Record: rec})
	}
	return pg, nil
}

var _ engine.FeedSignaler = (*backend)(nil)

// FeedSignal is each master's line of XADD in INFO commandstats: its
// calls, from scripts too, and their total time. The commit script's XADD
// is the only way an event is appended, so a line changes with every
// event; a failover, a restart or CONFIG RESETSTAT changes it too, unless
// the new counts happened to match the old to the microsecond, which would
// only hold a change back until the long poll's wait ends (the next call
// reads). One command per master, against a script per partition for a
// read.
func (b *backend) FeedSignal(ctx context.Context) (string, error) {
	var mu sync.Mutex
	var lines []string
	add := func(name string, c goredis.Cmdable) error {
		info, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		line := "none"
		if i := strings.Index(info, "cmdstat_xadd:"); i >= 0 {
			line, _, _ = strings.Cut(info[i:], "\n")
			line = strings.TrimSpace(line)
		}
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, name+" "+line)
		return nil
	}
	var err error
	if c, ok := b.client.(*goredis.ClusterClient); ok {
		err = c.ForEachMaster(ctx, func(ctx context.Context, n *goredis.Client) error { return add(n.Options().Addr, n) })
	} else {
		err = add("", b.client)
	}
	if err != nil {
		return "", unavailable(err)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n"), nil
}

// masterTimes returns the earliest and the latest time of the masters, in
// Unix ms.
func (b *backend) masterTimes(ctx context.Context) (lo, hi uint64, err error) {
	lo, hi, err = b.masterClocks(ctx)
	return lo / 1000, hi / 1000, err
}

// masterClocks returns the earliest and the latest time of the masters, in
// Unix µs.
func (b *backend) masterClocks(ctx context.Context) (lo, hi uint64, err error) {
	var mu sync.Mutex
	lo = math.MaxUint64
	add := func(c goredis.Cmdable) error {
		t, err := c.Time(ctx).Result()
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		us := uint64(t.UnixMicro())
		lo, hi = min(lo, us), max(hi, us)
		return nil
	}
	if c, ok := b.client.(*goredis.ClusterClient); ok {
		err = c.ForEachMaster(ctx, func(ctx context.Context, n *goredis.Client) error { return add(n) })
	} else {
		err = add(b.client)
	}
	if err != nil {
		return 0, 0, unavailable(err)
	}
	return lo, hi, nil
}

// raiseFloors raises every feed's last ID past the latest time of any
// master, and past every feed's own last ID (which a floor, or a clock
// that stepped back, may have put ahead of its master's time), at a
// resize's switch, before the next generation takes writes: its events
// then sort after every event of the generation it replaces, even on a
// master whose clock is behind, and a profile's order holds across the
// resize. It only ever raises them, so running it again (a reopen
// finishing the switch) is harmless.
func (b *backend) raiseFloors(ctx context.Context, partitions int) error {
	s, err := b.feedStreams(ctx)
	if err != nil {
		return err
	}
	s = max(s, partitions)
	_, hi, err := b.masterTimes(ctx)
	if err != nil {
		return err
	}
	floor := hi + 1
	for range 2 { // a second pass past a stream found ahead
		cmds, err := b.pipeScript(ctx, feedFloorScript, s, func(q int) ([]string, []any) {
			return []string{b.feedKey(partmap.Partition(q))}, []any{fmt.Sprintf("%d-0", floor)}
		})
		if err != nil {
			return err
		}
		ahead := floor
		for _, c := range cmds {
			if ms, seq, ok := parseID(fmt.Sprint(c.Val())); ok && (ms > floor || ms == floor && seq > 0) {
				ahead = max(ahead, ms+1)
			}
		}
		if ahead == floor {
			return nil
		}
		floor = ahead
	}
	return nil
}

// pipeScript runs script on n key sets in pipelines of a thousand, which
// go-redis splits by master: EVALSHA, then EVAL again where a server lacks
// the script (a restart, a failover).
func (b *backend) pipeScript(ctx context.Context, script *luaScript, n int, call func(i int) ([]string, []any)) ([]*goredis.Cmd, error) {
	cmds := make([]*goredis.Cmd, n)
	for lo := 0; lo < n; lo += 1000 {
		hi := min(lo+1000, n)
		run := func(eval bool) error {
			pipe := b.client.Pipeline()
			for i := lo; i < hi; i++ {
				keys, args := call(i)
				if eval {
					cmds[i] = script.Eval(ctx, pipe, keys, args...)
				} else {
					cmds[i] = script.EvalSha(ctx, pipe, keys, args...)
				}
			}
			_, err := pipe.Exec(ctx)
			return err
		}
		err := run(false)
		if err != nil && strings.Contains(err.Error(), "NOSCRIPT") {
			err = run(true)
		}
		if err != nil {
			return nil, unavailable(err)
		}
	}
	return cmds, nil
}

// TrimFeed trims every stream: keep is shared
// evenly between the streams, so a store keeps about keep events when its
// partitions are written about evenly.
func (b *backend) TrimFeed(ctx context.Context, before int64, keep int64) (partmap.FeedStats, error) {
	s, err := b.feedStreams(ctx)
	if err != nil {
		return partmap.FeedStats{}, err
	}
	all := make([]int, s)
	for q := range all {
		all[q] = q
	}
	// The hints of streams written are claimed first, as TrimWritten
	// claims them: this trim covers what they name, and they go.
	if err := b.hints.flush(ctx); err != nil {
		return partmap.FeedStats{}, err
	}
	token := newToken()
	claimed, err := b.claim(ctx, b.feedHintsKey(), time.Now().UnixMilli(), token, 1<<30)
	if err != nil {
		return partmap.FeedStats{}, err
	}
	b.feedMu.Lock()
	b.feedStats = map[int]streamStat{}
	b.feedMu.Unlock()
	per, left, err := b.trimStreams(ctx, s, all, before, keep)
	if err != nil {
		return partmap.FeedStats{}, err // the claims run out by themselves
	}
	scores := make([]string, len(claimed))
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	for i, base := range claimed {
		if q, err := strconv.Atoi(base); err == nil && q >= 0 && q < s && per > 0 && left[q] > per {
			scores[i] = now // a run's most: the next trim goes on
		}
	}
	if err := b.release(ctx, b.feedHintsKey(), token, claimed, scores); err != nil {
		return partmap.FeedStats{}, err
	}
	return b.feedTotals(), nil
}

// trimStreams trims the streams of partition numbers qs, of the s there
// are (feedtrim.lua), records what each holds now (noteStream), and
// returns each one's share of keep and how many events each holds.
func (b *backend) trimStreams(ctx context.Context, s int, qs []int, before int64, keep int64) (per int64, left []int64, err error) {
	if keep > 0 {
		per = max(1, (keep+int64(s)-1)/max(1, int64(s)))
	}
	cmds, err := b.pipeScript(ctx, feedTrimScript, len(qs), func(i int) ([]string, []any) {
		p := partmap.Partition(qs[i])
		return []string{b.feedKey(p), b.feedCutKey(p)}, []any{max(0, before), per, feedTrimRun}
	})
	if err != nil {
		return 0, nil, err
	}
	left = make([]int64, len(qs))
	for i, c := range cmds {
		r, _ := c.Val().([]any)
		if len(r) != 2 {
			return 0, nil, fmt.Errorf("redis: trimming the feed: unexpected reply %v", c.Val())
		}
		left[i], _ = r[0].(int64)
		first, _ := r[1].(string)
		b.noteStream(qs[i], left[i], first)
	}
	return per, left, nil
}
