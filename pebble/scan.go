package pebble

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/directory"
	"github.com/partmap/partmap/internal/record"
)

// Scan reads one page from a single iterator, which sees one consistent
// snapshot. Across pages, each scan starts strictly after the last key
// served, so a profile that exists throughout is served exactly once.
func (b *backend) Scan(ctx context.Context, after *directory.Position, end partmap.Partition, limit int) ([]directory.Item, error) {
	return scan(ctx, b.db, b.cur().prefix, after, end, limit)
}

// Snapshot is a Pebble snapshot: it costs writers nothing, and holds back
// compaction only of what changes while it is open.
func (b *backend) Snapshot(context.Context) (directory.Snapshot, error) {
	return snapshot{b.db.NewSnapshot(), b.cur().prefix}, nil
}

type snapshot struct {
	snap   *pebble.Snapshot
	prefix []byte
}

func (s snapshot) Scan(ctx context.Context, after *directory.Position, end partmap.Partition, limit int) ([]directory.Item, error) {
	return scan(ctx, s.snap, s.prefix, after, end, limit)
}

func (s snapshot) Close() error { return s.snap.Close() }

func scan(ctx context.Context, r pebble.Reader, pre []byte, after *directory.Position, end partmap.Partition, limit int) ([]directory.Item, error) {
	lower := kind(pre, prefixRecord, 0)
	if after != nil {
		lower = append(recordKey(pre, after.Partition, after.Email), 0) // the next key after it
	}
	it, err := r.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower, UpperBound: recordKey(pre, end, "")})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var items []directory.Item
	for ok := it.First(); ok && len(items) < limit; ok = it.Next() {
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
		items = append(items, directory.Item{
			Position: directory.Position{Partition: partmap.Partition(binary.BigEndian.Uint32(k[1:5])), Email: string(k[5:])},
			Record:   rec,
		})
	}
	return items, it.Error()
}

// Counts reads the per-partition count keys; only existing partitions have
// one.
func (b *backend) Counts(ctx context.Context) ([]partmap.PartitionCount, error) {
	pre := b.cur().prefix
	it, err := b.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: kind(pre, prefixCount, 0), UpperBound: kind(pre, prefixCount+1, 0)})
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
