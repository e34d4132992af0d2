package pebble

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
	"github.com/partmap/partmap/internal/record"
)

// Scan reads one page from a single iterator, which sees one consistent
// view. Across pages, each scan starts strictly after the last key served,
// so a profile that exists throughout is served exactly once.
func (b *backend) Scan(ctx context.Context, q engine.Query) ([]engine.Item, error) {
	if len(q.Where) > 0 {
		return b.search(ctx, q)
	}
	return scan(ctx, b.db, q)
}

// Snapshot is a Pebble snapshot: it costs writers nothing, and holds back
// compaction only of what changes while it is open.
func (b *backend) Snapshot(context.Context, engine.Layout) (engine.Snapshot, error) {
	return snapshot{b.db.NewSnapshot()}, nil
}

type snapshot struct{ snap *pebble.Snapshot }

func (s snapshot) Scan(ctx context.Context, q engine.Query) ([]engine.Item, error) {
	return scan(ctx, s.snap, q)
}

func (s snapshot) Close() error { return s.snap.Close() }

func scan(ctx context.Context, r pebble.Reader, q engine.Query) ([]engine.Item, error) {
	pre := genPrefix(q.Generation)
	lower := kind(pre, prefixRecord, 0)
	if q.After != nil {
		lower = append(recordKey(pre, q.After.Partition, q.After.Email), 0) // the next key after it
	}
	it, err := r.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower, UpperBound: recordKey(pre, q.End, "")})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var items []engine.Item
	for ok := it.First(); ok && len(items) < q.Limit; ok = it.Next() {
		k := it.Key()[len(pre):]
		if len(k) < 5 {
			return nil, fmt.Errorf("pebble: malformed record key %q", it.Key())
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, err
		}
		rec, err := record.Decode(v)
		if err != nil {
			return nil, fmt.Errorf("record key %q: %w", k, err)
		}
		items = append(items, engine.Item{
			Position: engine.Position{Partition: partmap.Partition(binary.BigEndian.Uint32(k[1:5])), Email: string(k[5:])},
			Record:   rec,
		})
	}
	return items, it.Error()
}

// search walks the partitions in order and, in each, the index entries of
// the first condition in email order, keeping the emails that every other
// condition's entry confirms. One iterator serves the whole page: each
// partition costs a seek, and a partition without matches nothing more.
func (b *backend) search(ctx context.Context, q engine.Query) ([]engine.Item, error) {
	pre := genPrefix(q.Generation)
	it, err := b.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: kind(pre, prefixIndex, 0), UpperBound: kind(pre, prefixIndex+1, 0)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	first := partmap.Partition(0)
	if q.After != nil {
		first = q.After.Partition
	}
	var items []engine.Item
	for p := first; p < q.End && len(items) < q.Limit; p++ {
		prefix := indexPrefix(pre, p, q.Where[0].Field, q.Where[0].Value)
		seek := prefix
		if q.After != nil && p == q.After.Partition {
			seek = append(append(bytes.Clone(prefix), q.After.Email...), 0) // strictly after it
		}
		part := engine.Part{Generation: q.Generation, Partition: p}
		for ok := it.SeekGE(seek); ok && len(items) < q.Limit; ok = it.Next() {
			k := it.Key()
			if !bytes.HasPrefix(k, prefix) {
				break
			}
			email := string(k[len(prefix):])
			match, err := b.hasEntries(pre, p, q.Where[1:], email)
			if err != nil {
				return nil, err
			}
			if !match {
				continue
			}
			recs, err := b.Get(ctx, part, []string{email})
			if err != nil {
				return nil, err
			}
			if recs[0] != nil { // nil: deleted since its entry was read
				items = append(items, engine.Item{Position: engine.Position{Partition: p, Email: email}, Record: *recs[0]})
			}
		}
		if err := it.Error(); err != nil {
			return nil, err
		}
	}
	return items, nil
}

// hasEntries reports whether email's profile has the index entry of every
// condition, by point lookups: Bloom filters make a miss cheap.
func (b *backend) hasEntries(pre []byte, p partmap.Partition, where []engine.IndexMatch, email string) (bool, error) {
	for _, m := range where {
		_, closer, err := b.db.Get(indexKey(pre, p, engine.IndexEntry{Field: m.Field, Value: m.Value, Email: email}))
		if errors.Is(err, pebble.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		closer.Close()
	}
	return true, nil
}

// Due reads the expiry entries by deadline first ("e" keys), so that its
// cost is what is due, not the partition count: a directory of a million
// partitions with nothing due costs one seek. Its order is soonest first.
func (b *backend) Due(ctx context.Context, gen int, first, end partmap.Partition, before int64, limit int, after *engine.Due) ([]engine.Due, error) {
	pre := genPrefix(gen)
	lower := kind(pre, prefixDue, 0)
	it, err := b.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower, UpperBound: append(bytes.Clone(lower), engine.ExpiryBound(before)...)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	ok := it.First()
	if after != nil {
		e := engine.IndexEntry{Field: engine.ExpiryField, Value: engine.ExpiryValue(after.Deadline, after.Profile), Email: after.Email}
		ok = it.SeekGE(append(dueKey(pre, after.Partition, e), 0)) // strictly after it
	}
	var out []engine.Due
	for ; ok && len(out) < limit; ok = it.Next() {
		k := it.Key()[len(lower):]
		if len(k) < 17+4 {
			return nil, fmt.Errorf("pebble: malformed expiry key %q", it.Key())
		}
		at, profile, valid := engine.ParseExpiryValue(string(k[:17]))
		if !valid {
			return nil, fmt.Errorf("pebble: malformed expiry key %q", it.Key())
		}
		p := partmap.Partition(binary.BigEndian.Uint32(k[17:21]))
		if p < first || p >= end {
			continue
		}
		out = append(out, engine.Due{Partition: p, Email: string(k[21:]), Deadline: at, Profile: profile})
	}
	return out, it.Error()
}
