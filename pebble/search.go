package pebble

import (
	"bytes"
	"context"

	"github.com/cockroachdb/pebble/v2"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/directory"
)

// Search walks the partitions in order and, in each, the index entries of
// the first condition in email order, keeping the emails that every other
// condition's entry confirms. One iterator serves the whole page: each
// partition costs a seek, and a partition without matches nothing more.
func (b *backend) Search(ctx context.Context, where []directory.IndexMatch, after *directory.Position, limit int) ([]directory.Item, error) {
	pre := b.cur().prefix
	it, err := b.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: kind(pre, prefixIndex, 0), UpperBound: kind(pre, prefixIndex+1, 0)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	first := partmap.Partition(0)
	if after != nil {
		first = after.Partition
	}
	var items []directory.Item
	for p := first; int(p) < b.cur().n && len(items) < limit; p++ {
		prefix := indexPrefix(pre, p, where[0].Field, where[0].Value)
		seek := prefix
		if after != nil && p == after.Partition {
			seek = append(append(bytes.Clone(prefix), after.Email...), 0) // strictly after it
		}
		for ok := it.SeekGE(seek); ok && len(items) < limit; ok = it.Next() {
			k := it.Key()
			if !bytes.HasPrefix(k, prefix) {
				break
			}
			email := string(k[len(prefix):])
			match, err := b.matchesRest(p, where[1:], email)
			if err != nil {
				return nil, err
			}
			if !match {
				continue
			}
			rec, ok, err := b.Get(ctx, p, email)
			if err != nil {
				return nil, err
			}
			// The iterator reads a moment earlier than Get: a profile that
			// changed in between no longer matches, and is left out.
			if ok && directory.Matches(b.indexes, rec.Profile, where) {
				items = append(items, directory.Item{Position: directory.Position{Partition: p, Email: email}, Record: rec})
			}
		}
		if err := it.Error(); err != nil {
			return nil, err
		}
	}
	return items, nil
}

func (b *backend) matchesRest(p partmap.Partition, rest []directory.IndexMatch, email string) (bool, error) {
	for _, m := range rest {
		_, closer, err := b.db.Get(indexKey(b.cur().prefix, p, directory.IndexEntry{Field: m.Field, Value: m.Value, Email: email}))
		if err == pebble.ErrNotFound {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		closer.Close()
	}
	return true, nil
}

// IndexEntries reads every index entry of p.
func (b *backend) IndexEntries(ctx context.Context, p partmap.Partition) ([]directory.IndexEntry, error) {
	pre := b.cur().prefix
	it, err := b.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: partitionIndexPrefix(pre, p), UpperBound: partitionIndexPrefix(pre, p+1)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []directory.IndexEntry
	for ok := it.First(); ok; ok = it.Next() {
		e, ok := parseIndexKey(it.Key()[len(pre):])
		if !ok {
			e = directory.IndexEntry{Field: -1, Email: string(it.Key())} // reported as drift
		}
		out = append(out, e)
	}
	return out, it.Error()
}
