package pebble

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/partmap/partmap/internal/engine"
)

var _ engine.Searcher = (*backend)(nil)

// parallelRanges is how many ranges make IndexRanges split them among
// the cores: a query's leaf reads one range in each of the 1,000
// partitions, and its latency is about 3.4 µs of seeking each
// (docs/PERFORMANCE.md).
const parallelRanges = 256

// IndexRanges reads the ranges, split among up to GOMAXPROCS goroutines
// when they are many: one iterator each, over consecutive ranges.
func (b *backend) IndexRanges(ctx context.Context, ranges []engine.IndexRange) ([][]engine.IndexEntry, error) {
	out := make([][]engine.IndexEntry, len(ranges))
	parts := min(runtime.GOMAXPROCS(0), len(ranges)/parallelRanges)
	if parts <= 1 {
		if err := b.readRanges(ctx, ranges, out); err != nil {
			return nil, err
		}
		return out, nil
	}
	errs := make([]error, parts)
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := p*len(ranges)/parts, (p+1)*len(ranges)/parts
		wg.Go(func() { errs[p] = b.readRanges(ctx, ranges[lo:hi], out[lo:hi]) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// readRanges reads every range into out with one iterator, by seeks that
// stop at the range's end (SeekGEWithLimit), not by resetting its bounds:
// Pebble then keeps each level's sstable open and positioned from one
// range to the next (resetting bounds cost a third of a selective query's
// time).
func (b *backend) readRanges(ctx context.Context, ranges []engine.IndexRange, out [][]engine.IndexEntry) error {
	if len(ranges) == 0 {
		return nil
	}
	var it *pebble.Iterator
	itGen := -1
	defer func() {
		if it != nil {
			it.Close()
		}
	}()
	var lower, upper []byte
	for i, r := range ranges {
		if r.Field < engine.SearchFieldBase || r.Field > engine.MaxSearchField {
			return fmt.Errorf("pebble: field %d holds no search entries", r.Field)
		}
		if i%64 == 63 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		pre := genPrefix(r.Part.Generation)
		if it == nil || itGen != r.Part.Generation {
			if it != nil {
				it.Close()
			}
			// Bounded by the generation's index entries only.
			var err error
			it, err = b.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: kind(pre, prefixIndex, 0), UpperBound: kind(pre, prefixIndex+1, 0)})
			if err != nil {
				return err
			}
			itGen = r.Part.Generation
		}
		field := searchPrefix(pre, r.Part.Partition, r.Field)
		lower = append(append(lower[:0], field...), r.From...)
		if r.To == "" {
			upper = searchPrefix(pre, r.Part.Partition, r.Field+1)
		} else {
			upper = append(append(upper[:0], field...), r.To...)
		}
		if bytes.Compare(lower, upper) >= 0 {
			continue
		}
		var found []engine.IndexEntry
		// The range's far end is the seek's limit: without one, a seek
		// into a range whose keys were all deleted would pass over their
		// tombstones, and those after, to the next live key anywhere.
		var state pebble.IterValidityState
		if r.Reverse {
			state = it.SeekLTWithLimit(upper, lower)
		} else {
			state = it.SeekGEWithLimit(lower, upper)
		}
		for ok := state == pebble.IterValid; ok && (r.Limit == 0 || len(found) < r.Limit); ok = step(it, r.Reverse, lower, upper) {
			k := it.Key()
			if r.Reverse && bytes.Compare(k, lower) < 0 || !r.Reverse && bytes.Compare(k, upper) >= 0 {
				break
			}
			var e engine.IndexEntry
			if r.EmailsOnly {
				// The email follows the value's 0 byte, the first after the
				// field's prefix: no value holds one.
				at := bytes.IndexByte(k[len(field):], 0)
				if at < 0 {
					return fmt.Errorf("pebble: malformed search entry %q", k)
				}
				e = engine.IndexEntry{Field: r.Field, Email: string(k[len(field)+at+1:])}
			} else if e, ok = parseIndexKey(k[len(pre):]); !ok {
				return fmt.Errorf("pebble: malformed search entry %q", k)
			}
			found = append(found, e)
		}
		if err := it.Error(); err != nil {
			return err
		}
		out[i] = found
	}
	return nil
}

func step(it *pebble.Iterator, reverse bool, lower, upper []byte) bool {
	if reverse {
		return it.PrevWithLimit(lower) == pebble.IterValid
	}
	return it.NextWithLimit(upper) == pebble.IterValid
}
