package pebble

import (
	"bytes"
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/partmap/partmap/internal/engine"
)

var _ engine.Searcher = (*backend)(nil)

// IndexRanges reads every range with one iterator, moved between them by
// SetBounds: a query of one word over 1000 partitions is 1000 seeks, not
// 1000 iterators.
func (b *backend) IndexRanges(ctx context.Context, ranges []engine.IndexRange) ([][]engine.IndexEntry, error) {
	out := make([][]engine.IndexEntry, len(ranges))
	if len(ranges) == 0 {
		return out, nil
	}
	it, err := b.db.NewIterWithContext(ctx, &pebble.IterOptions{})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	for i, r := range ranges {
		if r.Field < engine.SearchFieldBase || r.Field > engine.MaxSearchField {
			return nil, fmt.Errorf("pebble: field %d holds no search entries", r.Field)
		}
		if i%64 == 63 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		pre := genPrefix(r.Part.Generation)
		field := searchPrefix(pre, r.Part.Partition, r.Field)
		lower := append(bytes.Clone(field), r.From...)
		var upper []byte
		if r.To == "" {
			upper = searchPrefix(pre, r.Part.Partition, r.Field+1)
		} else {
			upper = append(bytes.Clone(field), r.To...)
		}
		if bytes.Compare(lower, upper) >= 0 {
			continue
		}
		it.SetBounds(lower, upper)
		first, next := it.First, it.Next
		if r.Reverse {
			first, next = it.Last, it.Prev
		}
		var found []engine.IndexEntry
		for ok := first(); ok && (r.Limit == 0 || len(found) < r.Limit); ok = next() {
			e, ok := parseIndexKey(it.Key()[len(pre):])
			if !ok {
				return nil, fmt.Errorf("pebble: malformed search entry %q", it.Key())
			}
			found = append(found, e)
		}
		if err := it.Error(); err != nil {
			return nil, err
		}
		out[i] = found
	}
	return out, nil
}
