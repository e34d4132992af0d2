package pebble

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
	"github.com/partmap/partmap/internal/record"
)

// The change feed is one sequence over the whole database, whatever the
// layout generation:
//
//	"f" | sequence number (uint64 BE)   one event (record.AppendEvent)
//	"g"                                 the cut (uint64 BE): every event numbered below it is trimmed
//
// A commit takes its events' numbers under feed.mu and writes them in its
// own batch, so an event is exactly as durable as its change. Commits reach
// the memtable, and their fsyncs complete, in another order than their
// numbers: a reader is shown only events up to the horizon, below which
// every number is durable or never will be (its commit failed), so no
// event ever appears behind a cursor already handed out.
const (
	prefixFeed = 'f'
	cutKeyByte = 'g'
)

var cutKey = []byte{cutKeyByte}

// restartGap is how far the numbering jumps at each open, past any number
// handed to a commit that the crash then lost: a cursor handed out before
// the crash can point past the last stored event (beyond a failed commit),
// and the events after the restart must still come after it.
const restartGap = 1 << 32

func feedKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixFeed}, seq)
}

type feed struct {
	mu      sync.Mutex
	next    uint64  // the next number to hand out
	lastMs  int64   // the last commit time handed out: times never go back
	pending []*span // handed out and not yet durable, in order

	horizon atomic.Uint64 // every number up to it is durable, or failed
	settled atomic.Uint64 // the last number of any commit settled: every one acknowledged is at or below it
	cut     atomic.Uint64 // every number below it is trimmed
	events  atomic.Int64  // durable events kept
	trimMu  sync.Mutex    // one trim at a time
}

// span is the numbers one commit took: first up to end.
type span struct {
	end  uint64
	n    int64
	done bool
	ok   bool
}

// loadFeed reads the cut and the newest number, and counts the events kept.
func (b *backend) loadFeed() error {
	f := &feed{}
	v, closer, err := b.db.Get(cutKey)
	switch {
	case err == nil:
		if len(v) != 8 {
			closer.Close()
			return fmt.Errorf("pebble: malformed feed cut %x", v)
		}
		f.cut.Store(binary.BigEndian.Uint64(v))
		closer.Close()
	case !errors.Is(err, pebble.ErrNotFound):
		return err
	}
	it, err := b.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixFeed}, UpperBound: []byte{prefixFeed + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	last := f.cut.Load()
	var n int64
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	if it.Last() {
		last = max(last, binary.BigEndian.Uint64(it.Key()[1:]))
	}
	if err := it.Error(); err != nil {
		return err
	}
	f.next = last + restartGap
	f.horizon.Store(f.next - 1)
	f.settled.Store(f.next - 1)
	f.events.Store(n)
	b.feed = f
	return nil
}

// take hands out a commit time for one commit, and a number for each of
// its writes that records an event; the span is nil when none does.
func (f *feed) take(writes []engine.Write) (*span, uint64, int64) {
	n := 0
	for _, w := range writes {
		if w.Change != engine.Move {
			n++
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastMs = max(f.lastMs, time.Now().UnixMilli())
	if n == 0 {
		return nil, 0, f.lastMs
	}
	first := f.next
	f.next += uint64(n)
	s := &span{end: f.next, n: int64(n)}
	f.pending = append(f.pending, s)
	return s, first, f.lastMs
}

// settle marks a commit's numbers done (durable, or failed when !ok) and
// moves the horizon over every done span at the front.
func (f *feed) settle(s *span, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s.done, s.ok = true, ok
	f.settled.Store(max(f.settled.Load(), s.end-1))
	i := 0
	for ; i < len(f.pending) && f.pending[i].done; i++ {
		if f.pending[i].ok {
			f.events.Add(f.pending[i].n)
		}
		f.horizon.Store(f.pending[i].end - 1)
	}
	if i > 0 {
		f.pending = append(f.pending[:0], f.pending[i:]...)
	}
}

// addEvents appends an event for every write that names a change, numbered
// from seq, at the commit time ms, as take handed them out.
func (f *feed) addEvents(batch *pebble.Batch, writes []engine.Write, encoded [][]byte, seq uint64, ms int64) error {
	var key, event []byte // reused: Set copies them into the batch
	for i, w := range writes {
		if w.Change == engine.Move {
			continue
		}
		key = binary.BigEndian.AppendUint64(append(key[:0], prefixFeed), seq)
		event = record.AppendEvent(event[:0], ms, w.Change, w.Email, encoded[i])
		if err := batch.Set(key, event, nil); err != nil {
			return err
		}
		seq++
	}
	return nil
}

func formatCursor(seq uint64) string { return strconv.FormatUint(seq, 10) }

func parseCursor(s string) (uint64, error) {
	seq, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, &partmap.Error{Code: partmap.EINVALID, Field: "after", Message: fmt.Sprintf("%q is not a change feed cursor of this store", s)}
	}
	return seq, nil
}

func (b *backend) Feed(ctx context.Context, after string, limit int) (engine.FeedPage, error) {
	f := b.feed
	// A commit is acknowledged once settled, but shown only once every
	// commit numbered before it has settled too: the page is at the end
	// only if the horizon has passed every commit settled before the call.
	settled := f.settled.Load()
	horizon := f.horizon.Load()
	var from uint64 // the first number to read
	switch after {
	case "":
		from = f.cut.Load()
	case partmap.FeedNow:
		return engine.FeedPage{Next: formatCursor(horizon), End: true}, nil
	default:
		seq, err := parseCursor(after)
		if err != nil {
			return engine.FeedPage{}, err
		}
		if seq > horizon {
			return engine.FeedPage{}, &partmap.Error{Code: partmap.EINVALID, Field: "after", Message: fmt.Sprintf("cursor %s is ahead of the change feed; it was not issued by this store", after)}
		}
		from = seq + 1
	}
	next := from - 1
	if from == 0 {
		next = 0 // an empty feed never trimmed: "0" is before everything
	}
	it, err := b.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: feedKey(from), UpperBound: feedKey(horizon + 1)})
	if err != nil {
		return engine.FeedPage{}, err
	}
	defer it.Close()
	var out []engine.Event
	ok := it.First()
	for ; ok && len(out) < limit; ok = it.Next() {
		seq := binary.BigEndian.Uint64(it.Key()[1:])
		v, err := it.ValueAndErr()
		if err != nil {
			return engine.FeedPage{}, err
		}
		ms, op, email, rec, err := record.DecodeEvent(v)
		if err != nil {
			return engine.FeedPage{}, fmt.Errorf("pebble: feed event %d: %w", seq, err)
		}
		out = append(out, engine.Event{Cursor: formatCursor(seq), Time: ms, Op: op, Email: email, Record: rec})
		next = seq
	}
	if err := it.Error(); err != nil {
		return engine.FeedPage{}, err
	}
	// Checked after reading: a trim that ran meanwhile may have deleted
	// what lay after the cursor, and the cut moves before the deletion.
	if cut := f.cut.Load(); from < cut {
		return engine.FeedPage{}, &partmap.Error{Code: partmap.ECURSOREXPIRED, Field: "after",
			Message: fmt.Sprintf("the change feed no longer holds the changes after cursor %s (retention); start again from a full listing or an export", after)}
	}
	return engine.FeedPage{Events: out, Next: formatCursor(next), End: !ok && horizon >= settled}, nil
}

// TrimFeed walks from the cut to the first event it keeps and deletes the
// range before it with a range deletion, durably, moving the cut first.
func (b *backend) TrimFeed(ctx context.Context, before int64, keep int64) (partmap.FeedStats, error) {
	f := b.feed
	f.trimMu.Lock()
	defer f.trimMu.Unlock()
	cut := f.cut.Load()
	drop := int64(0) // events to trim for keep
	if keep > 0 {
		drop = max(0, f.events.Load()-keep)
	}
	it, err := b.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: feedKey(cut), UpperBound: feedKey(f.horizon.Load() + 1)})
	if err != nil {
		return partmap.FeedStats{}, err
	}
	newCut, oldest := cut, int64(0)
	var trimmed int64
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return partmap.FeedStats{}, err
		}
		ms, _ := binary.Uvarint(v)
		if trimmed >= drop && int64(ms) >= before {
			oldest = int64(ms)
			break
		}
		trimmed++
		newCut = binary.BigEndian.Uint64(it.Key()[1:]) + 1
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return partmap.FeedStats{}, err
	}
	if newCut > cut {
		f.cut.Store(newCut) // before the deletion: a reader checks it after reading
		batch := b.db.NewBatch()
		defer batch.Close()
		err := errors.Join(batch.DeleteRange(feedKey(cut), feedKey(newCut), nil),
			batch.Set(cutKey, binary.BigEndian.AppendUint64(nil, newCut), nil))
		if err == nil {
			err = batch.Commit(pebble.Sync)
		}
		if err != nil {
			return partmap.FeedStats{}, err
		}
		f.events.Add(-trimmed)
	}
	size, err := b.db.EstimateDiskUsage(feedKey(newCut), []byte{prefixFeed + 1})
	if err != nil {
		return partmap.FeedStats{}, err
	}
	return partmap.FeedStats{Events: f.events.Load(), Bytes: int64(size), Oldest: oldest}, nil
}

// feedPosition is the cursor of the newest durable event: a backup taken
// now holds every change up to it.
func (b *backend) feedPosition() string { return formatCursor(b.feed.horizon.Load()) }
