package redis

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/directory"
)

// searchChunk is how many partitions one pipelined round of a search asks
// at once: a rare value need not cost a round trip per partition.
const searchChunk = 100

// Search reads, chunk by chunk of partitions, the first condition's entries
// in email order, confirms the other conditions with ZSCORE, and reads the
// survivors' records with MGET, one partition (one slot) at a time.
func (b *backend) Search(ctx context.Context, where []directory.IndexMatch, after *directory.Position, limit int) ([]directory.Item, error) {
	if err := b.checkCurrent(ctx); err != nil {
		return nil, err
	}
	first := partmap.Partition(0)
	if after != nil {
		first = after.Partition
	}
	prefix := valuePrefix(where[0].Value)
	key := func(p partmap.Partition) string { return b.indexKey(p, where[0].Field) }
	// Emails are ASCII, so 0xff ends one value's members.
	rng := func(p partmap.Partition, afterEmail string, count int) *goredis.ZRangeBy {
		min := "[" + prefix
		if afterEmail != "" {
			min = "(" + prefix + afterEmail
		}
		return &goredis.ZRangeBy{Min: min, Max: "(" + prefix + "\xff", Count: int64(count)}
	}
	var items []directory.Item
	n := partmap.Partition(b.cur().n)
	for lo := first; lo < n && len(items) < limit; lo += searchChunk {
		hi := min(lo+searchChunk, n)
		want := limit - len(items)
		pipe := b.client.Pipeline()
		cmds := make([]*goredis.StringSliceCmd, hi-lo)
		for p := lo; p < hi; p++ {
			afterEmail := ""
			if after != nil && p == after.Partition {
				afterEmail = after.Email
			}
			cmds[p-lo] = pipe.ZRangeByLex(ctx, key(p), rng(p, afterEmail, want))
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
			return nil, unavailable(err)
		}
		for p := lo; p < hi && len(items) < limit; p++ {
			members, err := cmds[p-lo].Result()
			count := want
			for err == nil && len(members) > 0 {
				emails := make([]string, len(members))
				for i, m := range members {
					emails[i] = m[len(prefix):]
				}
				found, ferr := b.searchPartition(ctx, p, where, emails, limit-len(items))
				if ferr != nil {
					return nil, ferr
				}
				items = append(items, found...)
				// A full batch whose members the other conditions thinned
				// out: the partition may hold more matches after it.
				if len(members) < count || len(items) >= limit {
					break
				}
				count = limit - len(items)
				members, err = b.client.ZRangeByLex(ctx, key(p), rng(p, emails[len(emails)-1], count)).Result()
			}
			if err != nil {
				return nil, unavailable(err)
			}
		}
	}
	return items, nil
}

func (b *backend) searchPartition(ctx context.Context, p partmap.Partition, where []directory.IndexMatch, emails []string, limit int) ([]directory.Item, error) {
	rest := where[1:]
	// Every member's score is 0, so only ZSCORE's nil tells a missing one
	// (go-redis reads ZMSCORE's nil as 0 too).
	for _, m := range rest {
		pipe := b.client.Pipeline()
		cmds := make([]*goredis.FloatCmd, len(emails))
		for i, e := range emails {
			cmds[i] = pipe.ZScore(ctx, b.indexKey(p, m.Field), indexMember(m.Value, e))
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
			return nil, unavailable(err)
		}
		kept := emails[:0:0]
		for i, e := range emails {
			if _, err := cmds[i].Result(); err == nil {
				kept = append(kept, e)
			} else if !errors.Is(err, goredis.Nil) {
				return nil, unavailable(err)
			}
		}
		emails = kept
	}
	if len(emails) > limit {
		emails = emails[:limit]
	}
	if len(emails) == 0 {
		return nil, nil
	}
	found, err := b.readRecords(ctx, p, emails)
	if err != nil {
		return nil, err
	}
	// Changed since its index entries were read: no longer a match.
	return slices.DeleteFunc(found, func(it directory.Item) bool { return !directory.Matches(b.indexes, it.Record.Profile, where) }), nil
}

// IndexEntries reads every indexed field's sorted set in p.
func (b *backend) IndexEntries(ctx context.Context, p partmap.Partition) ([]directory.IndexEntry, error) {
	var out []directory.IndexEntry
	for field := range b.indexes {
		members, err := b.client.ZRange(ctx, b.indexKey(p, field), 0, -1).Result()
		if err != nil {
			return nil, unavailable(err)
		}
		for _, m := range members {
			e, ok := parseIndexMember(m)
			if !ok {
				e = directory.IndexEntry{Email: m} // reported as drift
			}
			e.Field = field
			out = append(out, e)
		}
	}
	return out, nil
}

func parseIndexMember(m string) (directory.IndexEntry, bool) {
	if len(m) < 4 {
		return directory.IndexEntry{}, false
	}
	n := binary.BigEndian.Uint32([]byte(m[:4]))
	if uint64(n) > uint64(len(m)-4) {
		return directory.IndexEntry{}, false
	}
	return directory.IndexEntry{Value: m[4 : 4+n], Email: m[4+n:]}, true
}

// Count reads p's count key.
func (b *backend) Count(ctx context.Context, p partmap.Partition) (int64, error) {
	v, err := b.client.Get(ctx, b.countKey(p)).Result()
	if errors.Is(err, goredis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, unavailable(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("redis: count of %s is %q", p, v)
	}
	return n, nil
}
