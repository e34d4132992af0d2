package pebble

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
	"github.com/partmap/partmap/internal/record"
)

// backend keeps a directory in one Pebble database: every layout
// generation in a key space of its own (keys.go). One process owns the
// database (its directory lock keeps others out), so the engine's
// in-process locks are all the locking it needs, and it keeps no marks.
type backend struct {
	db       *pebble.DB
	feed     *feed
	cache    *recordCache // nil caches nothing
	present  *presence    // the record keys the database may hold; nil in read-only inspections
	metaMu   sync.Mutex   // serialises metadata updates
	inFlight atomic.Int64 // commits applied and waiting for their fsync
	delayed  atomic.Int64 // fsyncs held back for companions (syncDelay)
}

// syncDelay is how long the WAL's next fsync waits after the last one:
// delay while more than siblings commits wait for theirs, so that those
// arriving meanwhile share it, and nothing for a lone writer, who would
// only wait for nobody.
func (b *backend) syncDelay(delay time.Duration, siblings int) time.Duration {
	if b.inFlight.Load() <= int64(siblings) {
		return 0
	}
	b.delayed.Add(1)
	return delay
}

var (
	_ engine.Backend = (*backend)(nil)
	_ engine.Feeder  = (*backend)(nil)
)

func (b *backend) Meta(_ context.Context, update func([]byte) ([]byte, error)) ([]byte, error) {
	if update == nil {
		return b.readMeta()
	}
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	old, err := b.readMeta()
	if err != nil {
		return nil, err
	}
	v, err := update(old)
	if err != nil || bytes.Equal(v, old) {
		return v, err
	}
	return v, b.db.Set(metaKey, v, pebble.Sync)
}

func (b *backend) readMeta() ([]byte, error) {
	v, closer, err := b.db.Get(metaKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return bytes.Clone(v), nil
}

// Get reads one record with a point lookup, which Bloom filters make cheap
// when it is absent, and several through one iterator bounded to the
// partition, seeking in key order: point lookups would each build an
// iterator and consult every level's filters, and a bulk write reads a few
// records of each partition it touches (docs/PERFORMANCE.md).
func (b *backend) Get(_ context.Context, part engine.Part, emails []string) (out []*partmap.Record, err error) {
	pre := genPrefix(part.Generation)
	out = make([]*partmap.Record, len(emails))
	if len(emails) == 1 {
		rec, err := b.getOne(recordKey(pre, part.Partition, emails[0]))
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", part.Partition, emails[0], err)
		}
		out[0] = rec
		return out, nil
	}
	it, err := b.db.NewIter(&pebble.IterOptions{
		LowerBound: recordKey(pre, part.Partition, ""),
		UpperBound: recordKey(pre, part.Partition+1, ""),
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := it.Close(); err == nil && cerr != nil {
			out, err = nil, cerr
		}
	}()
	order := make([]int, len(emails))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int { return strings.Compare(emails[x], emails[y]) })
	for _, i := range order {
		k := recordKey(pre, part.Partition, emails[i])
		if b.present != nil && b.present.absentKey(k) {
			continue
		}
		// A prefix seek (the whole key is the prefix) consults each
		// sstable's Bloom filter first: most emails of a bulk write are new,
		// and a plain seek searched every level for each.
		if !it.SeekPrefixGE(k) || !bytes.Equal(it.Key(), k) {
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, err
		}
		rec, err := record.Decode(v) // copies: v is only valid until the next seek
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", part.Partition, emails[i], err)
		}
		out[i] = &rec
	}
	return out, it.Error()
}

var _ engine.ViewReader = (*backend)(nil)

// GetView reads the records of several partitions as they were at one
// instant: a batch lookup's, so that it sees a rename, or any commit of
// several partitions, whole or not at all. Each record comes from the
// record cache where it has it, as a single lookup's does, and the others
// from one Pebble iterator, which sees the database as it was when it was
// made. A cached value is kept only if it is settled once the iterator
// exists (recordCache.settled): it was then the database's from before
// the lookup until after the iterator was made, and so the iterator's
// too; one that is not is read from the iterator. A lookup that finds
// every record cached and settled needs no iterator at all.
func (b *backend) GetView(_ context.Context, gen int, reads []engine.Read) (out [][]*partmap.Record, err error) {
	pre := genPrefix(gen)
	type key struct {
		k      []byte
		i, j   int    // the answer's place: out[i][j]
		ticket uint64 // the cache's, for settled or fill
	}
	var hits, misses []key
	out = make([][]*partmap.Record, len(reads))
	for i, r := range reads {
		out[i] = make([]*partmap.Record, len(r.Emails))
		for j, e := range r.Emails {
			k := key{k: recordKey(pre, r.Partition, e), i: i, j: j}
			if b.cache == nil {
				misses = append(misses, k)
				continue
			}
			ok, ticket, err := b.cache.lookup(k.k, func(v []byte) error {
				if v == nil {
					return nil
				}
				rec, err := record.Decode(v) // copies: v is the cache's
				out[i][j] = &rec
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", r.Partition, e, err)
			}
			k.ticket = ticket
			if ok {
				hits = append(hits, k)
			} else {
				misses = append(misses, k)
			}
		}
	}
	var it *pebble.Iterator
	defer func() {
		if it != nil {
			if cerr := it.Close(); err == nil && cerr != nil {
				out, err = nil, cerr
			}
		}
	}()
	unsettled := func() []key {
		var out []key
		for _, k := range hits {
			if !b.cache.settled(k.k, k.ticket) {
				out = append(out, k)
			}
		}
		return out
	}
	view := func() error {
		var lo, hi []byte
		for _, ks := range [][]key{hits, misses} {
			for _, k := range ks {
				if lo == nil || bytes.Compare(k.k, lo) < 0 {
					lo = k.k
				}
				if hi == nil || bytes.Compare(k.k, hi) > 0 {
					hi = k.k
				}
			}
		}
		it, err = b.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: append(slices.Clip(hi), 0)})
		return err
	}
	if len(misses) > 0 {
		if err := view(); err != nil {
			return nil, err
		}
	}
	stale := unsettled()
	if len(stale) > 0 && it == nil {
		// The hits were settled with each other, but not since a view
		// that did not exist yet: settle them again after making one.
		if err := view(); err != nil {
			return nil, err
		}
		stale = unsettled()
	}
	if it == nil {
		return out, nil
	}
	// Seeks in key order; SeekPrefixGE consults the tables' Bloom filters,
	// as a point lookup does, since a record key is its own prefix.
	todo := append(misses, stale...)
	slices.SortFunc(todo, func(x, y key) int { return bytes.Compare(x.k, y.k) })
	for _, k := range todo {
		out[k.i][k.j] = nil
		if !it.SeekPrefixGE(k.k) || !bytes.Equal(it.Key(), k.k) {
			if err := it.Error(); err != nil {
				return nil, err
			}
			if b.cache != nil {
				b.cache.fill(k.k, k.ticket, nil) // known absent, unless a commit came since
			}
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, err
		}
		if b.cache != nil {
			b.cache.fill(k.k, k.ticket, v) // refused unless still the database's
		}
		rec, err := record.Decode(v) // copies: v is only valid until the next seek
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", reads[k.i].Partition, reads[k.i].Emails[k.j], err)
		}
		out[k.i][k.j] = &rec
	}
	return out, it.Error()
}

// getOne reads the record at k, nil if there is none, from the record
// cache when it has it.
func (b *backend) getOne(k []byte) (*partmap.Record, error) {
	var rec *partmap.Record
	decode := func(v []byte) error {
		if v == nil {
			return nil
		}
		r, err := record.Decode(v) // copies: v is the cache's or Pebble's
		rec = &r
		return err
	}
	var ticket uint64
	if b.cache != nil {
		ok, t, err := b.cache.lookup(k, decode)
		if ok || err != nil {
			return rec, err
		}
		ticket = t
	}
	if b.present != nil && b.present.absentKey(k) {
		return nil, nil
	}
	v, closer, err := b.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		v, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	if closer != nil {
		defer closer.Close()
	}
	if b.cache != nil {
		b.cache.fill(k, ticket, v)
	}
	err = decode(v) // sets rec: not in the return statement, whose order of evaluation is unspecified
	return rec, err
}

// Commit writes the records, their index entries and each partition's
// profile count in one batch. The count is read without a snapshot: the
// engine holds the partition's lock, so nobody else changes it.
func (b *backend) Commit(ctx context.Context, _ engine.Lease, writes []engine.Write) (func() error, error) {
	// The commit's time is its events' and every record's but a copy's;
	// the events' numbers are taken with it, so that time and numbers agree.
	events, seq, ms := b.feed.take(writes)
	batch := b.db.NewBatch()
	fail := func(err error) (func() error, error) {
		batch.Close()
		if events != nil {
			b.feed.settle(events, false)
		}
		return nil, err
	}
	delta := make(map[engine.Part]int, 1)
	encoded := make([][]byte, len(writes)) // once for the record, its event and the cache
	keys := make([][]byte, len(writes))
	for i, w := range writes {
		pre := genPrefix(w.Part.Generation)
		for _, e := range w.Remove {
			if err := batch.Delete(indexKey(pre, w.Part.Partition, e), nil); err != nil {
				return fail(err)
			}
			if e.Field == engine.ExpiryField {
				if err := batch.Delete(dueKey(pre, w.Part.Partition, e), nil); err != nil {
					return fail(err)
				}
			}
		}
		for _, e := range w.Add {
			if err := batch.Set(indexKey(pre, w.Part.Partition, e), nil, nil); err != nil {
				return fail(err)
			}
			if e.Field == engine.ExpiryField {
				if err := batch.Set(dueKey(pre, w.Part.Partition, e), nil, nil); err != nil {
					return fail(err)
				}
			}
		}
		k := recordKey(pre, w.Part.Partition, w.Email)
		keys[i] = k
		if w.Record != nil && b.present != nil {
			b.present.add(k) // before the batch applies: the filter never lacks a stored key
		}
		var err error
		switch {
		case w.Record == nil:
			err = batch.Delete(k, nil)
			delta[w.Part]--
		case w.Created:
			encoded[i] = encodeAt(w, ms)
			err = batch.Set(k, encoded[i], nil)
			delta[w.Part]++
		default:
			encoded[i] = encodeAt(w, ms)
			err = batch.Set(k, encoded[i], nil)
		}
		if err != nil {
			return fail(err)
		}
	}
	for part, d := range delta {
		if d == 0 {
			continue
		}
		n, err := b.count(part)
		if err != nil {
			return fail(err)
		}
		k := countKey(genPrefix(part.Generation), part.Partition)
		if n += int64(d); n > 0 {
			err = batch.Set(k, binary.AppendUvarint(nil, uint64(n)), nil)
		} else {
			err = batch.Delete(k, nil) // a partition exists only while it holds a profile
		}
		if err != nil {
			return fail(err)
		}
	}
	if err := b.feed.addEvents(batch, writes, encoded, seq, ms); err != nil {
		return fail(err)
	}
	// Visible now; durable once the WAL's fsync, which the engine waits for
	// after releasing its locks, so that the next writer joins the same
	// fsync instead of queueing behind it. The feed shows the events only
	// then.
	b.inFlight.Add(1)
	if b.cache != nil {
		b.cache.begin(keys)
	}
	err := b.db.ApplyNoSyncWait(batch, pebble.Sync)
	if b.cache != nil {
		fill := encoded
		if !fillsCache(ctx, writes) {
			fill = nil // a bulk write's records: drop what the cache held
		}
		b.cache.end(keys, fill, err == nil)
	}
	if err != nil {
		b.inFlight.Add(-1)
		return fail(err)
	}
	return func() error {
		defer batch.Close()
		defer b.inFlight.Add(-1)
		err := batch.SyncWait()
		if events != nil {
			b.feed.settle(events, err == nil)
		}
		return err
	}, nil
}

// encodeAt encodes w's record with the commit time ms, or, for a copy,
// with its own.
func encodeAt(w engine.Write, ms int64) []byte {
	if w.Copy {
		return record.Encode(*w.Record)
	}
	rec := *w.Record
	rec.Committed = ms
	return record.Encode(rec)
}

func (b *backend) count(part engine.Part) (int64, error) {
	v, closer, err := b.db.Get(countKey(genPrefix(part.Generation), part.Partition))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	n, w := binary.Uvarint(v)
	if w <= 0 {
		return 0, fmt.Errorf("%s: corrupt profile count", part.Partition)
	}
	return int64(n), nil
}

// Counts reads the count keys in range; only partitions with profiles have
// one.
func (b *backend) Counts(ctx context.Context, gen int, first, end partmap.Partition) ([]partmap.PartitionCount, error) {
	pre := genPrefix(gen)
	it, err := b.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: countKey(pre, first), UpperBound: countKey(pre, end)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []partmap.PartitionCount
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()[len(pre):]
		n, w := binary.Uvarint(it.Value())
		if len(k) != 5 || w <= 0 {
			return nil, fmt.Errorf("pebble: malformed count %q=%q", k, it.Value())
		}
		out = append(out, partmap.PartitionCount{Partition: partmap.Partition(binary.BigEndian.Uint32(k[1:])), Profiles: int64(n)})
	}
	return out, it.Error()
}

func (b *backend) IndexEntries(ctx context.Context, part engine.Part) ([]engine.IndexEntry, error) {
	pre := genPrefix(part.Generation)
	it, err := b.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: partitionIndexPrefix(pre, part.Partition), UpperBound: partitionIndexPrefix(pre, part.Partition+1)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []engine.IndexEntry
	for ok := it.First(); ok; ok = it.Next() {
		e, ok := parseIndexKey(it.Key()[len(pre):])
		if !ok {
			e = engine.IndexEntry{Field: -1, Email: string(it.Key())} // reported as drift
		}
		out = append(out, e)
	}
	return out, it.Error()
}

// Drop deletes a generation's keys with range deletions, durably.
func (b *backend) Drop(_ context.Context, l engine.Layout) error {
	batch := b.db.NewBatch()
	defer batch.Close()
	for _, r := range generationRanges(l.Generation) {
		if err := batch.DeleteRange(r[0], r[1], nil); err != nil {
			return err
		}
	}
	if err := batch.Commit(pebble.Sync); err != nil {
		return err
	}
	if b.cache != nil {
		b.cache.purge()
	}
	return nil
}
