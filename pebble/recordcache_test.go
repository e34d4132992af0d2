package pebble

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/storetest"
)

// cached is what the cache answers for key: the value, and whether it had
// one (nil with true is a record known absent).
func cached(t *testing.T, c *recordCache, key string) (string, bool) {
	t.Helper()
	var got []byte
	ok, _, err := c.lookup([]byte(key), func(v []byte) error {
		got = append([]byte(nil), v...)
		if v == nil {
			got = nil
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(got), ok
}

func ticket(t *testing.T, c *recordCache, key string) uint64 {
	t.Helper()
	ok, tk, _ := c.lookup([]byte(key), func([]byte) error { return nil })
	if ok {
		t.Fatalf("%s is cached already", key)
	}
	return tk
}

func keys(ks ...string) [][]byte {
	out := make([][]byte, len(ks))
	for i, k := range ks {
		out[i] = []byte(k)
	}
	return out
}

// readThrough is a lookup that misses and fills the cache with what it
// read, no commit of key between the two.
func readThrough(t *testing.T, c *recordCache, key, value string) {
	t.Helper()
	c.fill([]byte(key), ticket(t, c, key), []byte(value))
}

// commit is a successful commit that writes value to key.
func commit(c *recordCache, key, value string) {
	c.begin(keys(key))
	c.end(keys(key), keys(value), true)
}

// notCached fails if the cache answers for key; when says after what.
func notCached(t *testing.T, c *recordCache, key, when string) {
	t.Helper()
	if v, ok := cached(t, c, key); ok {
		t.Fatalf("cached %q %s", v, when)
	}
}

// cachedAs fails unless the cache answers value for key.
func cachedAs(t *testing.T, c *recordCache, key, value, when string) {
	t.Helper()
	if v, ok := cached(t, c, key); !ok || v != value {
		t.Fatalf("cached %q, %v %s; want %q", v, ok, when, value)
	}
}

func TestRecordCacheKeepsOnlyTheDatabasesValue(t *testing.T) {
	t.Run("a read before a commit is not stored after it", func(t *testing.T) {
		c := newRecordCache(1 << 20)
		tk := ticket(t, c, "k")
		commit(c, "k", "new")
		c.fill([]byte("k"), tk, []byte("old"))
		cachedAs(t, c, "k", "new", "after a commit that followed the read")
	})
	t.Run("a read is not stored while a commit is under way", func(t *testing.T) {
		c := newRecordCache(1 << 20)
		c.begin(keys("k"))
		tk := ticket(t, c, "k") // taken after begin: the epoch alone cannot tell
		c.fill([]byte("k"), tk, []byte("old"))
		notCached(t, c, "k", "while a commit of the key was under way")
		c.end(keys("k"), keys("new"), true)
		cachedAs(t, c, "k", "new", "after the commit")
	})
	t.Run("a read during a commit is not stored after it", func(t *testing.T) {
		c := newRecordCache(1 << 20)
		c.begin(keys("k"))
		tk := ticket(t, c, "k") // may read the database before the batch applies
		c.end(keys("k"), keys("new"), true)
		c.values.Del([]byte("k")) // evicted
		c.fill([]byte("k"), tk, []byte("old"))
		notCached(t, c, "k", "read during a commit, after it")
	})
	t.Run("a lookup during a commit of the key is not answered from the cache", func(t *testing.T) {
		c := newRecordCache(1 << 20)
		readThrough(t, c, "k", "old")
		c.begin(keys("k"))
		notCached(t, c, "k", "during a commit of the key")
		c.end(keys("k"), keys("new"), true)
		cachedAs(t, c, "k", "new", "after the commit")
	})
	t.Run("a commit's value overwrites the old one in the ring", func(t *testing.T) {
		c := newRecordCache(1 << 20)
		readThrough(t, c, "k", "old")
		commit(c, "k", "new")
		if n := c.values.OverwriteCount(); n != 1 {
			t.Fatalf("%d overwrites in place; a value appended anew makes the ring evict sooner under writes", n)
		}
	})
	t.Run("a value too large to cache does not leave the old one", func(t *testing.T) {
		c := newRecordCache(minRecordCacheBytes)
		readThrough(t, c, "k", "old")
		c.begin(keys("k"))
		c.end(keys("k"), [][]byte{make([]byte, minRecordCacheBytes/512)}, true)
		if v, ok := cached(t, c, "k"); ok {
			t.Fatalf("cached %d bytes; want nothing", len(v))
		}
	})
	t.Run("a failed commit leaves nothing", func(t *testing.T) {
		c := newRecordCache(1 << 20)
		readThrough(t, c, "k", "old")
		c.begin(keys("k"))
		c.end(keys("k"), keys("new"), false)
		notCached(t, c, "k", "after a failed commit")
	})
	t.Run("overlapping commits of a key leave nothing", func(t *testing.T) {
		c := newRecordCache(1 << 20)
		readThrough(t, c, "k", "old")
		c.begin(keys("k"))
		c.begin(keys("k"))
		c.end(keys("k"), keys("second"), true) // applied last, ended first
		c.end(keys("k"), keys("first"), true)
		notCached(t, c, "k", "after overlapping commits: the last commit to end need not be the last applied")
		commit(c, "k", "alone")
		cachedAs(t, c, "k", "alone", "after a later commit alone")
	})
	t.Run("a deletion is cached as absent", func(t *testing.T) {
		c := newRecordCache(1 << 20)
		c.begin(keys("k"))
		c.end([][]byte{[]byte("k")}, [][]byte{nil}, true)
		cachedAs(t, c, "k", "", "after a deletion (known absent)")
		c.fill([]byte("j"), ticket(t, c, "j"), nil)
		if _, ok := cached(t, c, "j"); !ok {
			t.Fatal("an absent record read from the database is not cached")
		}
	})
	t.Run("a purge forgets everything, and what commits under way wrote", func(t *testing.T) {
		c := newRecordCache(1 << 20)
		readThrough(t, c, "a", "old")
		tk := ticket(t, c, "b")
		c.begin(keys("c"))
		c.purge()
		c.end(keys("c"), keys("new"), true)
		c.fill([]byte("b"), tk, []byte("old"))
		for _, k := range []string{"a", "b", "c"} {
			if v, ok := cached(t, c, k); ok {
				t.Errorf("%s: cached %q after a purge", k, v)
			}
		}
	})
	t.Run("a cached value is settled until a commit of its shard begins", func(t *testing.T) {
		c := newRecordCache(1 << 20)
		readThrough(t, c, "k", "v")
		ok, tk, _ := c.lookup([]byte("k"), func([]byte) error { return nil })
		if !ok || !c.settled([]byte("k"), tk) {
			t.Fatalf("a hit with no commit since: cached %v, settled %v", ok, c.settled([]byte("k"), tk))
		}
		c.begin(keys("k"))
		if c.settled([]byte("k"), tk) {
			t.Fatal("settled while a commit of the key is under way")
		}
		c.end(keys("k"), keys("new"), true)
		if c.settled([]byte("k"), tk) {
			t.Fatal("settled after a commit of the key began and ended since the lookup")
		}
	})
	t.Run("a key under way is never settled, whatever its ticket", func(t *testing.T) {
		// A lookup without the mutex can take its ticket after a commit's
		// begin changed the epoch and still miss its mark: the ticket then
		// matches, and only the mark tells that the batch may apply.
		c := newRecordCache(1 << 20)
		readThrough(t, c, "k", "old")
		c.begin(keys("k"))
		tk := c.shard([]byte("k")).epoch.Load()
		if c.settled([]byte("k"), tk) {
			t.Fatal("settled while a commit of the key is under way")
		}
		c.end(keys("k"), keys("new"), true)
	})
	t.Run("commits of other keys leave a key's value", func(t *testing.T) {
		c := newRecordCache(1 << 20)
		readThrough(t, c, "k", "v")
		for i := range 100 {
			commit(c, fmt.Sprint("other", i), "x")
		}
		cachedAs(t, c, "k", "v", "after commits of other keys")
	})
}

func TestRecordCacheIsBounded(t *testing.T) {
	c := newRecordCache(minRecordCacheBytes)
	v := make([]byte, 200)
	for i := range 100_000 {
		k := []byte(fmt.Sprint("user", i, "@example.com"))
		c.fill(k, ticket(t, c, string(k)), v)
	}
	if n := c.values.EntryCount(); n*200 > minRecordCacheBytes {
		t.Fatalf("%d entries of 200 bytes in a cache of %d bytes", n, minRecordCacheBytes)
	}
	if _, ok := cached(t, c, "user99999@example.com"); !ok {
		t.Fatal("the newest entry was evicted")
	}
}

// Readers never see a counter older than one a write or another lookup had
// returned before they began, while writers
// increment and replace a few profiles of one partition: what a cache that
// kept a stale value, or showed a write later than Pebble does, would
// serve. Lookups of one profile are answered from the record cache; batch
// lookups read Pebble.
func TestLookupsWithTheRecordCacheAreNeverStale(t *testing.T) {
	ctx := context.Background()
	s := MustStart(t, &Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: time.Second, SweepInterval: -1}})
	// In one partition, so that a batch lookup of them all reads Pebble
	// with one iterator, past the cache.
	emails := collidingEmails(3, 278)
	for _, e := range emails {
		if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{"emailAddress": e, "n": "0"}, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
	// done[i] is the highest count a write of emails[i] has returned; an
	// upsert now and then sets it to a higher floor, so counts only grow.
	var done [3]atomic.Int64
	// read[i] is the highest count a lookup of emails[i] has returned: a
	// lookup that begins after it must not see less either.
	var read [3]atomic.Int64
	const floor = 1 << 20
	var failed atomic.Bool
	fail := func(format string, a ...any) {
		if failed.CompareAndSwap(false, true) {
			t.Errorf(format, a...)
		}
	}
	stopWriters := storetest.UntilStopped(4, func(w, n int) bool {
		i := (w + n) % len(emails)
		if n%50 == 49 && w == 0 {
			// Replace the whole record with a count above any so far.
			next := (done[i].Load()/floor + 1) * floor
			if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{"emailAddress": emails[i], "n": strconv.FormatInt(next, 10)}, partmap.Condition{}); err != nil {
				fail("upsert: %v", err)
				return false
			}
			storeMax(&done[i], next)
			return true
		}
		inc, err := partmap.IncrementField(ctx, s, emails[i], "n", 1, partmap.Condition{})
		if err != nil {
			fail("increment: %v", err)
			return false
		}
		storeMax(&done[i], inc.Value)
		return true
	})
	// Even readers look up one profile, from the cache; odd ones all
	// three, from Pebble. seen[r] is what reader r has seen.
	var seen [4][3]int64
	stopReaders := storetest.UntilStopped(4, func(r, n int) bool {
		var before [3]int64
		for i := range before {
			before[i] = max(done[i].Load(), read[i].Load())
		}
		var recs []*partmap.Record
		if r%2 == 0 {
			i := (r + n) % len(emails)
			rec, err := s.FindProfile(ctx, emails[i])
			if err != nil {
				fail("find: %v", err)
				return false
			}
			recs = make([]*partmap.Record, len(emails))
			recs[i] = &rec
		} else {
			var err error
			if recs, err = s.FindProfiles(ctx, emails); err != nil {
				fail("find many: %v", err)
				return false
			}
		}
		for i, rec := range recs {
			if rec == nil {
				continue
			}
			got, _ := strconv.ParseInt(rec.Profile["n"], 10, 64)
			if got < before[i] || got < seen[r][i] {
				fail("%s: reader %d read %d after a write or lookup returned %d, having seen %d", emails[i], r, got, before[i], seen[r][i])
			}
			seen[r][i] = got
			storeMax(&read[i], got)
		}
		return true
	})
	time.Sleep(3 * time.Second)
	stopWriters()
	stopReaders()
	var reads int64
	if c := s.backend.cache; c != nil {
		reads = c.hits()
	}
	t.Logf("counts reached %d, %d, %d; %d lookups answered from the cache", done[0].Load(), done[1].Load(), done[2].Load(), reads)
	if reads == 0 {
		t.Fatal("no lookup was answered from the record cache: the test tested Pebble alone")
	}
}

func storeMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// BenchmarkRecordCache compares lookups of one profile answered from the
// record cache with the same lookups from Pebble, over 20,000 profiles
// flushed to sstables, from every core.
//
//	go test -run '^$' -bench BenchmarkRecordCache -benchtime 2s ./pebble
func BenchmarkRecordCache(b *testing.B) {
	ctx := context.Background()
	for _, bc := range []struct {
		name  string
		bytes int64
	}{{"cached", 0}, {"uncached", -1}} {
		b.Run(bc.name, func(b *testing.B) {
			s, _ := MustOpen(b, &Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1, SweepInterval: -1}, RecordCacheBytes: bc.bytes})
			emails := collidingEmails(20000, 278)
			fillPartition(b, s, 278, emails)
			if err := s.db.Flush(); err != nil {
				b.Fatal(err)
			}
			for _, e := range emails { // warm both caches
				if _, err := s.FindProfile(ctx, e); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			var n atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				i := int(n.Add(7919))
				for pb.Next() {
					if _, err := s.FindProfile(ctx, emails[i%len(emails)]); err != nil {
						b.Fatal(err)
					}
					i += 7919
				}
			})
		})
	}
}

// A commit of one profile stores its record in the cache; a bulk write's
// records are dropped from it instead, so that an import neither pays to
// fill the cache nor evicts the records lookups were using.
func TestRecordCacheSkipsBulkWrites(t *testing.T) {
	ctx := context.Background()
	s := MustStart(t, &Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1, SweepInterval: -1}})
	c := s.backend.cache
	key := func(email string) string {
		return string(recordKey(genPrefix(0), partmap.PartitionOf(email, partmap.DefaultPartitions), email))
	}
	if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: "one@example.com"}, partmap.Condition{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := cached(t, c, key("one@example.com")); !ok {
		t.Fatal("a single write left its record out of the cache")
	}
	var bulk []partmap.Profile
	for i := range 1000 {
		bulk = append(bulk, partmap.Profile{partmap.FieldEmail: fmt.Sprintf("bulk%d@example.com", i)})
	}
	bulk = append(bulk, partmap.Profile{partmap.FieldEmail: "one@example.com", "fullName": "One"})
	if _, err := s.UpsertProfiles(ctx, bulk); err != nil {
		t.Fatal(err)
	}
	for _, p := range bulk {
		if v, ok := cached(t, c, key(p.Email())); ok {
			t.Fatalf("a bulk write left %s in the cache: %q", p.Email(), v)
		}
	}
	if rec, err := s.FindProfile(ctx, "one@example.com"); err != nil || rec.Profile["fullName"] != "One" {
		t.Fatalf("after the bulk write: %v %v", rec.Profile, err)
	}
	if _, ok := cached(t, c, key("one@example.com")); !ok {
		t.Fatal("a lookup after the bulk write did not fill the cache")
	}
}
