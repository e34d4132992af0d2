package redis_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
	"github.com/partmap/partmap/internal/redistest"
	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/redis"
)

// commandStats returns INFO commandstats as calls by command, but INFO.
// Redis counts there the commands a script runs as well as the script.
func commandStats(t *testing.T, c *goredis.Client) map[string]int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(info, "\n") {
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(stats, "calls="), ",")
		n, err := strconv.Atoi(calls)
		if err != nil {
			t.Fatalf("commandstats line %q: %v", line, err)
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return out
}

// settledStats is commandStats once two reads a HintFlush apart agree:
// what earlier writes left to send has gone out.
func settledStats(t *testing.T, c *goredis.Client) map[string]int {
	t.Helper()
	last := commandStats(t, c)
	for {
		time.Sleep(2 * redis.HintFlush)
		now := commandStats(t, c)
		if maps.Equal(now, last) {
			return now
		}
		last = now
	}
}

// startedOwnServer starts a redis-server for one test alone, so that
// nothing else counts in its statistics, and a started store on it; it
// returns the store, a client of the server's own for INFO or MONITOR,
// and the server, all closed when the test ends.
func startedOwnServer(t *testing.T) (*redis.Store, *goredis.Client, *redistest.Server) {
	t.Helper()
	srv := redistest.StartTestServer(t)
	admin := srv.Client(t)
	// No sweeper, no feed trimmer, no finisher, no backstop: their passes
	// would land in the commands counted.
	opts := redis.Options{}
	opts.SweepInterval, opts.FeedTrimInterval, opts.FinishInterval, opts.BackstopRate = -1, -1, -1, -1
	s := mustOpen(t, goredis.NewClient(&goredis.Options{Network: "unix", Addr: srv.Socket}), &opts)
	if _, err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, admin, srv
}

// A single-profile write costs two round trips to Redis (the read and the
// commit script), a read one: Redis's MONITOR counts what the store sends,
// and INFO commandstats confirms one commit script and one MGET each. The
// store has a redis-server of its own, so that nothing else counts. The
// hints of where the writes left work (the feeds they wrote) go out
// apart, one pipeline per HintFlush at most, whatever the writes.
func TestRoundTrips(t *testing.T) {
	ctx := context.Background()
	s, stats, srv := startedOwnServer(t)
	// Once first, so that the commit script is loaded (EVALSHA's NOSCRIPT
	// and the EVAL after it happen once per server).
	if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: "warm@example.com"}, partmap.Condition{}); err != nil {
		t.Fatal(err)
	}
	// The writes of hints (a ZADD of a key outside every partition),
	// which a server sends a few times a second whatever its load, are
	// counted apart.
	hints := 0
	mon := startMonitor(t, "unix", srv.Socket, stats, func(line string) bool {
		if strings.Contains(line, `] "zadd" "partmap:`) {
			hints++
			return false
		}
		return !strings.Contains(line, `] "hello" `) // a new connection's, once (the hints' own)
	})
	const n = 200
	email := func(i int) string { return fmt.Sprintf("rt%d@example.com", i) }
	one := "1"
	ops := []struct {
		name   string
		writes bool
		op     func(i int) error
	}{
		{"create", true, func(i int) error {
			_, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: email(i), "customerTier": "gold"}, partmap.Condition{})
			return err
		}},
		{"replace", true, func(i int) error {
			_, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: email(i), "customerTier": "silver"}, partmap.Condition{})
			return err
		}},
		{"patch", true, func(i int) error {
			_, err := partmap.PatchProfile(ctx, s, email(i), partmap.Patch{"visits": &one}, partmap.Condition{})
			return err
		}},
		{"increment", true, func(i int) error {
			_, err := partmap.IncrementField(ctx, s, email(i), "visits", 1, partmap.Condition{})
			return err
		}},
		{"get", false, func(i int) error {
			_, err := s.FindProfile(ctx, email(i))
			return err
		}},
		{"delete", true, func(i int) error { return partmap.DeleteProfile(ctx, s, email(i), partmap.Condition{}) }},
	}
	for _, o := range ops {
		before := commandStats(t, stats)
		began := time.Now()
		for i := range n {
			if err := o.op(i); err != nil {
				t.Fatalf("%s %d: %v", o.name, i, err)
			}
		}
		hints = 0
		sent := mon.count()
		after := commandStats(t, stats)
		// A flush of hints per interval at most, whatever the writes.
		if flushes := 2 + int(time.Since(began)/redis.HintFlush); hints > flushes {
			t.Errorf("%s: %d writes of hints in %v; want at most %d", o.name, hints, time.Since(began), flushes)
		}
		scripts := after["evalsha"] + after["eval"] - before["evalsha"] - before["eval"]
		reads := after["mget"] - before["mget"]
		t.Logf("%s: %d commands sent for %d operations (%d scripts, %d MGETs), and %d writes of hints", o.name, sent, n, scripts, reads, hints)
		want, wantScripts := n, 0
		if o.writes {
			want, wantScripts = 2*n, n
		}
		if sent > want || scripts != wantScripts || reads != n {
			t.Errorf("%s: %d commands (%d scripts, %d MGETs) for %d operations; want at most %d, with %d scripts and %d MGETs",
				o.name, sent, scripts, reads, n, want, wantScripts, n)
		}
	}
}

// Many writers, through two servers on one Redis, increment and re-tier
// the same few profiles of one partition: no increment is lost or counted
// twice, and the partition's count and index entries agree with its
// profiles. Writes to one record from two servers meet only in the commit
// script's version check.
func TestHotPartitionTwoServers(t *testing.T) {
	ctx := context.Background()
	a, b := openShared(t, nil)
	if _, err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	emails, _ := storetest.Colliding(12, partmap.DefaultPartitions, "hot")
	for _, e := range emails {
		if _, _, err := partmap.UpsertProfile(ctx, a, partmap.Profile{partmap.FieldEmail: e, "visits": "0"}, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
	tiers := []string{"gold", "silver", "bronze"}
	var mu sync.Mutex
	acked := map[string]int64{}
	conflicts := 0
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 14))
			s := a
			if w%2 == 1 {
				s = b
			}
			for range 60 {
				e := emails[rng.IntN(len(emails))]
				var err error
				if rng.IntN(4) == 0 {
					tier := tiers[rng.IntN(len(tiers))]
					_, err = partmap.PatchProfile(ctx, s, e, partmap.Patch{"customerTier": &tier}, partmap.Condition{})
				} else {
					_, err = partmap.IncrementField(ctx, s, e, "visits", 1, partmap.Condition{})
					if err == nil {
						mu.Lock()
						acked[e]++
						mu.Unlock()
					}
				}
				switch {
				case errors.Is(err, partmap.ErrLockConflict):
					mu.Lock()
					conflicts++ // nothing written: the checker counts only acknowledged increments
					mu.Unlock()
				case err != nil:
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d lock conflicts of %d operations", conflicts, 32*60)
	byTier := map[string]int{}
	for _, e := range emails {
		rec, err := b.FindProfile(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		if got := rec.Profile["visits"]; got != strconv.FormatInt(acked[e], 10) {
			t.Errorf("%s: visits %s, want the %d increments acknowledged", e, got, acked[e])
		}
		byTier[rec.Profile["customerTier"]]++
	}
	for _, tier := range tiers {
		page, err := a.ListProfiles(ctx, partmap.ListOptions{Where: []partmap.Match{{Field: "customerTier", Value: tier}}, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Profiles) != byTier[tier] {
			t.Errorf("search %s: %d profiles, want %d", tier, len(page.Profiles), byTier[tier])
		}
	}
	storetest.CheckAll(t, a)
}

// A single-partition write takes no lock in Redis but respects one: while
// another server holds its partition's lock, it waits (within its lock
// wait) and commits after the release, or, failing fast, conflicts and
// writes nothing.
func TestCheckedWriteRespectsHeldLock(t *testing.T) {
	ctx := context.Background()
	a, b := openShared(t, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: time.Minute}})
	if _, err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	fast := openAgain(t, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}})
	const email = "held@example.com"
	_, p, _ := partmap.Locate(email, partmap.DefaultPartitions)
	part := engine.Part{Partition: p}
	locked, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- a.Engine().Invoke(ctx, engine.Invocation{Load: []engine.Part{part}, Lock: []engine.Part{part}}, func(tx *engine.Tx) error {
			close(locked)
			<-release
			return tx.Put(part, email, partmap.Record{Profile: partmap.Profile{partmap.FieldEmail: email, "fullName": "a"}, Version: 1}, partmap.OpPut)
		})
	}()
	<-locked
	if _, _, err := partmap.UpsertProfile(ctx, fast, partmap.Profile{partmap.FieldEmail: email, "fullName": "fast"}, partmap.Condition{}); !errors.Is(err, partmap.ErrLockConflict) {
		t.Fatalf("a fail-fast write to a partition another server holds: %v, want a conflict", err)
	}
	waited := make(chan error, 1)
	go func() {
		_, _, err := partmap.UpsertProfile(ctx, b, partmap.Profile{partmap.FieldEmail: email, "fullName": "b"}, partmap.Condition{})
		waited <- err
	}()
	select {
	case err := <-waited:
		t.Fatalf("a write went through another server's lock: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("the waiting write: %v", err)
	}
	if rec, err := a.FindProfile(ctx, email); err != nil || rec.Profile["fullName"] != "b" {
		t.Fatalf("after both: %v %v; want the waiting write last", rec.Profile, err)
	}
}

// A batch lookup sends one MGET per partition it reads, however many of
// the partition's emails it asks for and however often: INFO commandstats
// counts them on a redis-server of the store's own.
func TestBatchLookupMGETsPerPartition(t *testing.T) {
	ctx := context.Background()
	s, stats, _ := startedOwnServer(t)
	crowd, _ := storetest.Colliding(6, partmap.DefaultPartitions, "mget")
	var profiles []partmap.Profile
	for _, e := range crowd[:4] {
		profiles = append(profiles, partmap.Profile{partmap.FieldEmail: e})
	}
	for i := range 200 {
		profiles = append(profiles, partmap.Profile{partmap.FieldEmail: fmt.Sprintf("b%d@example.com", i)})
	}
	if _, err := s.UpsertProfiles(ctx, profiles); err != nil {
		t.Fatal(err)
	}
	var ask []string
	partitions := map[partmap.Partition]bool{}
	for i := 0; len(ask) < partmap.MaxBatchEmails; i++ {
		e := fmt.Sprintf("b%d@example.com", i%400) // half present, each asked for 2 or 3 times
		if i%50 == 0 {
			e = crowd[i/50%len(crowd)]
		}
		ask = append(ask, strings.ToUpper(e))
		partitions[partmap.PartitionOf(e, partmap.DefaultPartitions)] = true
	}
	// The hints of the writes above go out up to a HintFlush later: a slow
	// machine sent their ZADD in the middle of the lookup.
	before := settledStats(t, stats)
	recs, err := s.FindProfiles(ctx, ask)
	if err != nil {
		t.Fatal(err)
	}
	after := commandStats(t, stats)
	found := 0
	for _, rec := range recs {
		if rec != nil {
			found++
		}
	}
	mgets := after["mget"] - before["mget"]
	t.Logf("%d emails (%d found) in %d partitions: %d MGETs", len(ask), found, len(partitions), mgets)
	if mgets != len(partitions) {
		t.Errorf("%d MGETs for %d emails in %d partitions; want one per partition", mgets, len(ask), len(partitions))
	}
	for k, n := range after {
		// A connection the pool dials for the lookup says HELLO first.
		if k != "mget" && k != "hello" && n != before[k] {
			t.Errorf("a batch lookup sent %d %s commands; it should send only MGETs", n-before[k], k)
		}
	}
}
