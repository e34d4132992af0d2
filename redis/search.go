package redis

import (
	"context"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap/internal/engine"
)

var _ engine.Searcher = (*backend)(nil)

// searchRound bounds how many ranges one pipeline asks: a query of one
// word over 1000 partitions is a round trip or two, not a thousand.
const searchRound = 500

// IndexRanges reads the ranges with ZRANGEBYLEX (ZREVRANGEBYLEX), each
// with its partition's pending intent and lock in the same pipeline: a
// partition where a transaction is pending is read again, alone, once it
// is resolved (rangeSettled).
func (b *backend) IndexRanges(ctx context.Context, ranges []engine.IndexRange) ([][]engine.IndexEntry, error) {
	out := make([][]engine.IndexEntry, len(ranges))
	for lo := 0; lo < len(ranges); lo += searchRound {
		batch := ranges[lo:min(lo+searchRound, len(ranges))]
		pipe := b.client.Pipeline()
		txs := make([]*goredis.SliceCmd, len(batch))
		cmds := make([]*goredis.StringSliceCmd, len(batch))
		for i, r := range batch {
			txs[i] = pipe.MGet(ctx, b.pendingKey(r.Part), b.lockKey(r.Part))
			by := lexRange(r)
			if r.Reverse {
				cmds[i] = pipe.ZRevRangeByLex(ctx, b.indexKey(r.Part, r.Field), by)
			} else {
				cmds[i] = pipe.ZRangeByLex(ctx, b.indexKey(r.Part, r.Field), by)
			}
		}
		if _, err := pipe.Exec(ctx); err != nil && err != goredis.Nil {
			return nil, unavailable(err)
		}
		for i, r := range batch {
			members := cmds[i].Val()
			if raw, _ := txs[i].Val()[0].(string); raw != "" {
				var err error
				if members, err = b.settledRange(ctx, r); err != nil {
					return nil, err
				}
			}
			found := make([]engine.IndexEntry, 0, len(members))
			for _, m := range members {
				e, ok := parseSearchMember(r.Field, m)
				if !ok {
					continue // not partmap's: the check reports it
				}
				found = append(found, e)
			}
			out[lo+i] = found
		}
	}
	return out, nil
}

// settledRange reads r again once its partition's pending transaction is
// resolved.
func (b *backend) settledRange(ctx context.Context, r engine.IndexRange) ([]string, error) {
	if r.Reverse {
		// rangeSettled reads forward only: resolve with a forward read,
		// then read backward (a transaction committing between the two
		// shows, as it would a moment later).
		if _, err := b.rangeSettled(ctx, r.Part, b.indexKey(r.Part, r.Field), &goredis.ZRangeBy{Min: "-", Max: "-", Count: 1}); err != nil {
			return nil, err
		}
		members, err := b.client.ZRevRangeByLex(ctx, b.indexKey(r.Part, r.Field), lexRange(r)).Result()
		return members, unavailable(err)
	}
	return b.rangeSettled(ctx, r.Part, b.indexKey(r.Part, r.Field), lexRange(r))
}

func lexRange(r engine.IndexRange) *goredis.ZRangeBy {
	by := &goredis.ZRangeBy{Min: "[" + r.From, Max: "+"}
	if r.To != "" {
		by.Max = "(" + r.To
	}
	if r.Limit > 0 {
		by.Count = int64(r.Limit)
	}
	return by
}

func parseSearchMember(field int, m string) (engine.IndexEntry, bool) {
	for i := 0; i < len(m); i++ {
		if m[i] == 0 {
			return engine.IndexEntry{Field: field, Value: m[:i], Email: m[i+1:]}, true
		}
	}
	return engine.IndexEntry{}, false
}
