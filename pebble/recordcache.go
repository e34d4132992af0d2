package pebble

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/coocood/freecache"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

// recordCache keeps recently read and written records, encoded, by record
// key, so that a lookup of one record (the most common request by far)
// skips Pebble's memtable and level search. The records live in a
// freecache ring of fixed size, which the Go collector does not scan: a
// map of 100,000 entries on the heap made every collection walk them.
//
// Pebble still holds every record; the cache holds a key's value only
// while it is the database's:
//
//   - A commit marks its keys busy before it applies its batch, and
//     replaces their values after, then clears the marks; a lookup of a
//     busy key reads Pebble. So a lookup that begins once the batch is
//     visible never finds the value it replaced. The old value stays
//     until then so that the new one can overwrite it in the ring rather
//     than be appended: appending made the ring evict under writes.
//   - A lookup that missed stores what it read only if no commit to the
//     shard began or ended since it looked (the shard's epoch) and none of
//     the key is under way, so a value read before a commit applied is
//     never stored after it.
//
// An absent record is cached too, as an empty value (an encoded record
// never is): a lookup of an unknown email is common (a create's read, a
// client's existence check).
type recordCache struct {
	values     *freecache.Cache
	seed       maphash.Seed
	shards     [recordCacheShards]cacheShard
	busyMisses atomic.Int64 // lookups of busy keys, which freecache does not count
}

func (c *recordCache) hits() int64   { return c.values.HitCount() }
func (c *recordCache) misses() int64 { return c.values.MissCount() + c.busyMisses.Load() }

const recordCacheShards = 64

type cacheShard struct {
	epoch atomic.Uint64 // commits begun and ended, and purges; changed under mu
	busyN atomic.Int32  // len(busy), so that lookups skip the mutex when 0
	mu    sync.Mutex
	busy  map[string]*cacheWriters // keys commits are writing
}

type cacheWriters struct {
	n int
	// contended is set when commits of the key overlapped: the last to end
	// need not be the last applied, so none of them may store its value.
	contended bool
}

// minRecordCacheBytes is freecache's smallest size.
const minRecordCacheBytes = 512 << 10

// newRecordCache is a cache of about bytes; nil for bytes ≤ 0, which
// caches nothing. A record whose key and value with freecache's 24-byte
// header exceed bytes/1024 is not cached.
func newRecordCache(bytes int64) *recordCache {
	if bytes <= 0 {
		return nil
	}
	c := &recordCache{values: freecache.NewCache(int(max(bytes, minRecordCacheBytes))), seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].busy = make(map[string]*cacheWriters)
	}
	return c
}

func (c *recordCache) shard(key []byte) *cacheShard {
	return &c.shards[maphash.Bytes(c.seed, key)%recordCacheShards]
}

// lookup calls found with the cached value of key (nil for a record known
// absent) and returns true, or returns false; either way with a ticket,
// for fill after reading Pebble on a miss, or for settled on a hit. found
// must not keep the slice.
func (c *recordCache) lookup(key []byte, found func(v []byte) error) (ok bool, ticket uint64, err error) {
	s := c.shard(key)
	ticket = s.epoch.Load()
	// A key is marked busy before its batch applies and unmarked only
	// after its new value replaced the old, so a lookup that finds no mark
	// can answer from the cache.
	if s.busyN.Load() > 0 {
		s.mu.Lock()
		busy := s.busy[string(key)] != nil
		s.mu.Unlock()
		if busy {
			c.busyMisses.Add(1)
			return false, ticket, nil
		}
	}
	err = c.values.GetFn(key, func(v []byte) error {
		ok = true
		if len(v) == 0 {
			v = nil
		}
		return found(v)
	})
	if ok {
		return true, ticket, err
	}
	return false, ticket, nil
}

// settled says that no commit of key's shard began or ended since lookup
// gave ticket, and that none of key is under way: the value lookup found
// was then the database's all along, from before lookup until now. A
// batch lookup reads several keys from the cache and the rest from one
// Pebble view taken meanwhile, and keeps a cached value only if it is
// settled after the view was taken, so that it is the view's too.
//
// The mark matters besides the epoch: a commit whose begin changed the
// epoch before lookup took its ticket, but whose mark lookup, reading
// without the mutex, did not see yet, may apply before the view is taken
// while lookup found the old value.
func (c *recordCache) settled(key []byte, ticket uint64) bool {
	s := c.shard(key)
	if s.busyN.Load() > 0 {
		s.mu.Lock()
		busy := s.busy[string(key)] != nil
		s.mu.Unlock()
		if busy {
			return false
		}
	}
	return s.epoch.Load() == ticket
}

// fill stores v, read from Pebble after lookup gave ticket, unless a
// commit of the shard began or ended since, or one of the key is under way.
func (c *recordCache) fill(key []byte, ticket uint64, v []byte) {
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.epoch.Load() != ticket || s.busy[string(key)] != nil {
		return
	}
	c.values.Set(key, v, 0) // fails only for a record too large to cache
}

// fillsCache says whether a commit stores its records in the cache: one
// of a few records does (a write of one profile, a transaction, a
// pipeline's group of writes, whose records were read first); a bulk
// write's (engine.Bulk: an import, a sweep, a resize's copy) drops them
// instead. Storing an import's records cost a sixth of its CPU (issue 32:
// 2.46 s of server CPU for 200,000 profiles without, 2.95 s with) and
// replaced the records lookups were using with records nobody may ask
// for; a lookup of one of them fills it on its first miss. Dropping a
// group's instead made every write of the next group read Pebble: a third
// of the server's CPU under redis-benchmark -P 16.
func fillsCache(ctx context.Context, writes []engine.Write) bool {
	return !engine.IsBulk(ctx) && len(writes) <= partmap.MaxTransactionOps
}

// begin marks keys busy before their batch is applied; end must follow.
func (c *recordCache) begin(keys [][]byte) {
	for _, k := range keys {
		s := c.shard(k)
		s.mu.Lock()
		s.epoch.Add(1)
		w := s.busy[string(k)]
		if w == nil {
			w = &cacheWriters{}
			s.busy[string(k)] = w
			s.busyN.Store(int32(len(s.busy)))
		}
		w.contended = w.contended || w.n > 0
		w.n++
		s.mu.Unlock()
	}
}

// end follows begin once the batch is applied, with the values it wrote
// (nil for a deletion), or once it failed (applied false). values nil
// drops every key instead of storing its value: a bulk write's.
func (c *recordCache) end(keys, values [][]byte, applied bool) {
	for i, k := range keys {
		s := c.shard(k)
		s.mu.Lock()
		s.epoch.Add(1) // a lookup that began during the commit may have read the old value
		w := s.busy[string(k)]
		if w.n--; w.n == 0 {
			// The value first, the mark after: a lookup that sees no
			// mark reads the cache without the mutex. A value too large to
			// cache must not leave the old one.
			if !applied || w.contended || values == nil || c.values.Set(k, values[i], 0) != nil {
				c.values.Del(k)
			}
			delete(s.busy, string(k))
			s.busyN.Store(int32(len(s.busy)))
		}
		s.mu.Unlock()
	}
}

// purge forgets every record, after keys were deleted by range. A commit
// under way may have applied before the deletion, so it stores nothing.
func (c *recordCache) purge() {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		s.epoch.Add(1)
		for _, w := range s.busy {
			w.contended = true
		}
		s.mu.Unlock()
	}
	c.values.Clear()
}
