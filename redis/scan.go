package redis

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

// Scan reads partitions in order, each in email order from its email set,
// and the records with one MGET per batch (one slot); a search reads the
// index instead.
func (b *backend) Scan(ctx context.Context, q engine.Query) ([]engine.Item, error) {
	if err := b.checkCurrent(ctx, q.Generation); err != nil {
		return nil, err
	}
	if len(q.Where) > 0 {
		return b.search(ctx, q)
	}
	var items []engine.Item
	first := partmap.Partition(0)
	if q.After != nil {
		first = q.After.Partition
	}
	for p := first; p < q.End && len(items) < q.Limit; p++ {
		part := engine.Part{Generation: q.Generation, Partition: p}
		min := "-"
		if q.After != nil && p == q.After.Partition {
			min = "(" + q.After.Email
		}
		for len(items) < q.Limit {
			count := q.Limit - len(items)
			emails, err := b.rangeSettled(ctx, part, b.emailsKey(part), &goredis.ZRangeBy{Min: min, Max: "+", Count: int64(count)})
			if err != nil {
				return nil, err
			}
			if len(emails) == 0 {
				break
			}
			found, err := b.readRecords(ctx, part, emails)
			if err != nil {
				return nil, err
			}
			items = append(items, found...)
			// A full batch thinned by deletions may leave more in p.
			if len(emails) < count {
				break
			}
			min = "(" + emails[len(emails)-1]
		}
	}
	return items, nil
}

// rangeSettled reads a ZRANGEBYLEX of one of part's sorted sets together
// with part's pending intent and lock, in one round trip, and resolves
// the intent first when there is one (resolve): a scan must not read a
// partition a committed transaction has not rolled forward yet.
func (b *backend) rangeSettled(ctx context.Context, part engine.Part, key string, by *goredis.ZRangeBy) ([]string, error) {
	for try := 0; ; try++ {
		pipe := b.client.Pipeline()
		tx := pipe.MGet(ctx, b.pendingKey(part), b.lockKey(part))
		rng := pipe.ZRangeByLex(ctx, key, by)
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, unavailable(err)
		}
		raw, _ := tx.Val()[0].(string)
		if raw == "" {
			return rng.Val(), nil
		}
		lock, _ := tx.Val()[1].(string)
		inFlight, err := b.resolve(ctx, part, raw, lock)
		if err != nil {
			return nil, err
		}
		if inFlight {
			return rng.Val(), nil
		}
		if try == maxResolves {
			return nil, partmap.Errorf(partmap.EUNAVAILABLE, "transactions kept pending on %s; retry", part.Partition)
		}
	}
}

// checkCurrent refuses, as stale, a scan of a generation another server's
// resize has retired (and dropped).
func (b *backend) checkCurrent(ctx context.Context, gen int) error {
	state, err := b.client.Get(ctx, b.stateKey(engine.Part{Generation: gen})).Result()
	switch {
	case errors.Is(err, goredis.Nil):
		return nil
	case err != nil:
		return unavailable(err)
	case state == string(engine.StageRetired):
		return engine.ErrStale
	}
	return nil
}

// readRecords reads the records of emails in part with one MGET (one slot),
// leaving out those deleted since their emails were read.
func (b *backend) readRecords(ctx context.Context, part engine.Part, emails []string) ([]engine.Item, error) {
	recs, _, err := b.mgetRecords(ctx, part, emails)
	if err != nil {
		return nil, err
	}
	var items []engine.Item
	for i, rec := range recs {
		if rec != nil { // nil: deleted between the two reads
			items = append(items, engine.Item{Position: engine.Position{Partition: part.Partition, Email: emails[i]}, Record: *rec})
		}
	}
	return items, nil
}

// searchChunk is how many partitions one pipelined round of a search asks
// at once: a rare value need not cost a round trip per partition.
const searchChunk = 100

// search reads, chunk by chunk of partitions, the first condition's entries
// in email order, confirms the other conditions with ZSCORE, and reads the
// survivors' records with MGET, one partition (one slot) at a time.
func (b *backend) search(ctx context.Context, q engine.Query) ([]engine.Item, error) {
	first := partmap.Partition(0)
	if q.After != nil {
		first = q.After.Partition
	}
	prefix := valuePrefix(q.Where[0].Value)
	key := func(p partmap.Partition) string {
		return b.indexKey(engine.Part{Generation: q.Generation, Partition: p}, q.Where[0].Field)
	}
	// Emails are ASCII, so 0xff ends one value's members.
	rng := func(afterEmail string, count int) *goredis.ZRangeBy {
		min := "[" + prefix
		if afterEmail != "" {
			min = "(" + prefix + afterEmail
		}
		return &goredis.ZRangeBy{Min: min, Max: "(" + prefix + "\xff", Count: int64(count)}
	}
	var items []engine.Item
	try := 0
	for lo := first; lo < q.End && len(items) < q.Limit; lo += searchChunk {
		hi := min(lo+searchChunk, q.End)
		want := q.Limit - len(items)
		// With each partition's intent and lock: a chunk where one is
		// pending is read again once it is resolved.
		pipe := b.client.Pipeline()
		cmds := make([]*goredis.StringSliceCmd, hi-lo)
		txs := make([]*goredis.SliceCmd, hi-lo)
		for p := lo; p < hi; p++ {
			part := engine.Part{Generation: q.Generation, Partition: p}
			txs[p-lo] = pipe.MGet(ctx, b.pendingKey(part), b.lockKey(part))
			afterEmail := ""
			if q.After != nil && p == q.After.Partition {
				afterEmail = q.After.Email
			}
			cmds[p-lo] = pipe.ZRangeByLex(ctx, key(p), rng(afterEmail, want))
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
			return nil, unavailable(err)
		}
		again, err := b.resolveAll(ctx, q.Generation, lo, txs)
		if err != nil {
			return nil, err
		}
		if again {
			if try++; try > maxResolves {
				return nil, partmap.Errorf(partmap.EUNAVAILABLE, "transactions kept pending; retry")
			}
			lo -= searchChunk
			continue
		}
		try = 0
		for p := lo; p < hi && len(items) < q.Limit; p++ {
			part := engine.Part{Generation: q.Generation, Partition: p}
			members, err := cmds[p-lo].Result()
			count := want
			for err == nil && len(members) > 0 {
				emails := make([]string, len(members))
				for i, m := range members {
					emails[i] = m[len(prefix):]
				}
				found, ferr := b.searchPartition(ctx, part, q.Where[1:], emails, q.Limit-len(items))
				if ferr != nil {
					return nil, ferr
				}
				items = append(items, found...)
				// A full batch whose members the other conditions thinned
				// out: the partition may hold more matches after it.
				if len(members) < count || len(items) >= q.Limit {
					break
				}
				count = q.Limit - len(items)
				members, err = b.rangeSettled(ctx, part, key(p), rng(emails[len(emails)-1], count))
			}
			if err != nil {
				return nil, unavailable(err)
			}
		}
	}
	return items, nil
}

// resolveAll resolves the intents that MGETs of partitions' intents and
// locks (from first on, in order) found, and reports whether any was
// resolved, so that what was read with them must be read again.
func (b *backend) resolveAll(ctx context.Context, gen int, first partmap.Partition, txs []*goredis.SliceCmd) (again bool, err error) {
	for i, c := range txs {
		vals := c.Val()
		raw, _ := vals[0].(string)
		if raw == "" {
			continue
		}
		lock, _ := vals[1].(string)
		inFlight, err := b.resolve(ctx, engine.Part{Generation: gen, Partition: first + partmap.Partition(i)}, raw, lock)
		if err != nil {
			return false, err
		}
		again = again || !inFlight
	}
	return again, nil
}

// searchPartition keeps the emails whose entries hold every other
// condition and reads their records, up to limit.
func (b *backend) searchPartition(ctx context.Context, part engine.Part, rest []engine.IndexMatch, emails []string, limit int) ([]engine.Item, error) {
	// Every member's score is 0, so only ZSCORE's nil tells a missing one
	// (go-redis reads ZMSCORE's nil as 0 too).
	for _, m := range rest {
		pipe := b.client.Pipeline()
		cmds := make([]*goredis.FloatCmd, len(emails))
		for i, e := range emails {
			cmds[i] = pipe.ZScore(ctx, b.indexKey(part, m.Field), indexMember(m.Value, e))
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
	return b.readRecords(ctx, part, emails)
}

// snapshotLockWait is how long a snapshot waits for each busy partition
// lock. Writers hold a lock for a round trip or two, so it is generous.
const snapshotLockWait = 10 * time.Second

// Snapshot freezes the generation by holding every partition's lock:
// Redis has no snapshots, and Redis Cluster cannot read many slots
// atomically. A lock lost meanwhile (a failover, a stalled process) fails
// the export rather than passing off a moving view as a snapshot.
func (b *backend) Snapshot(ctx context.Context, l engine.Layout) (engine.Snapshot, error) {
	parts := make([]engine.Part, l.Partitions)
	for i := range parts {
		parts[i] = engine.Part{Generation: l.Generation, Partition: partmap.Partition(i)}
	}
	held, err := b.Lock(ctx, parts, snapshotLockWait, engine.Named{})
	if err != nil {
		return nil, err
	}
	return frozen{held.(*lease)}, nil
}

type frozen struct{ *lease }

func (f frozen) Scan(ctx context.Context, q engine.Query) ([]engine.Item, error) {
	if err := f.err(); err != nil {
		return nil, err
	}
	return f.b.Scan(ctx, q)
}

func (f frozen) Close() error { return f.Release() }

// Due reads each partition's expiry entries that are due, a range of its
// expiry sorted set by value, in pipelines of a thousand partitions. Its
// order is partition by partition, then soonest first.
func (b *backend) Due(ctx context.Context, gen int, first, end partmap.Partition, before int64, limit int, after *engine.Due) ([]engine.Due, error) {
	lo := "[" + string(binary.BigEndian.AppendUint32(nil, 17))
	hi := "(" + lo[1:] + engine.ExpiryBound(before)
	if after != nil {
		first = max(first, after.Partition)
	}
	var out []engine.Due
	for chunk := first; chunk < end && len(out) < limit; chunk += 1000 {
		last := min(chunk+1000, end)
		pipe := b.client.Pipeline()
		cmds := make([]*goredis.StringSliceCmd, 0, last-chunk)
		for p := chunk; p < last; p++ {
			key := b.indexKey(engine.Part{Generation: gen, Partition: p}, engine.ExpiryField)
			from := lo
			if after != nil && p == after.Partition {
				from = "(" + indexMember(engine.ExpiryValue(after.Deadline, after.Profile), after.Email) // strictly after it
			}
			cmds = append(cmds, pipe.ZRangeByLex(ctx, key, &goredis.ZRangeBy{Min: from, Max: hi, Count: int64(min(limit, 1<<30))}))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, unavailable(err)
		}
		for i, c := range cmds {
			for _, m := range c.Val() {
				e, ok := parseIndexMember(m)
				at, profile, ok2 := engine.ParseExpiryValue(e.Value)
				if !ok || !ok2 {
					return nil, fmt.Errorf("redis: malformed expiry entry %q", m)
				}
				out = append(out, engine.Due{Partition: chunk + partmap.Partition(i), Email: e.Email, Deadline: at, Profile: profile})
			}
		}
	}
	return out[:min(len(out), limit)], nil
}
