package redis_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/crashtest"
	"github.com/partmap/partmap/internal/engine"
	"github.com/partmap/partmap/internal/redistest"
	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/redis"
)

// server is the redis-server TestMain starts on a private unix socket.
var server struct {
	socket string
	nextDB atomic.Int64
}

const databases = 64

func TestMain(m *testing.M) {
	if os.Getenv(crashEnv) != "" { // a committer that a crash test kills
		os.Exit(crashChild())
	}
	crashtest.ExpiryChildMain(openExpiry) // a writer TestExpiryCrash kills
	crashtest.SearchChildMain(openSearch) // a writer TestSearchCrash kills
	dir, err := os.MkdirTemp("", "partmap-redis-")
	if err != nil {
		panic(err)
	}
	single, err := redistest.StartServer(dir, databases)
	if err == nil {
		server.socket = single.Socket
		cluster.Cluster, err = redistest.StartCluster(filepath.Join(dir, "cluster"))
		if err != nil {
			single.Stop()
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	cluster.Stop()
	single.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

// open returns a store on an emptied database of its own.
func open(t *testing.T, opts *redis.Options) *redis.Store {
	t.Helper()
	db := int(server.nextDB.Add(1) % databases)
	c := goredis.NewClient(&goredis.Options{Network: "unix", Addr: server.socket, DB: db})
	if err := c.FlushDB(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	return mustOpen(t, c, opts)
}

// lockedOn is email's partition in the default layout, and an invocation
// that loads and locks it.
func lockedOn(email string) (engine.Part, engine.Invocation) {
	_, p, _ := partmap.Locate(email, partmap.DefaultPartitions)
	part := engine.Part{Partition: p}
	return part, engine.Invocation{Load: []engine.Part{part}, Lock: []engine.Part{part}}
}

// mustOpen opens a store through c, closed when the test ends.
func mustOpen(t testing.TB, c goredis.UniversalClient, opts *redis.Options) *redis.Store {
	t.Helper()
	// A test's server is alone on its database unless the test says
	// otherwise: it does not poll for other servers' search indexes,
	// whose GETs tests that count commands would count, and its index
	// builds do not wait for them.
	o := redis.Options{IndexPoll: -1}
	if opts != nil {
		o = *opts
		o.IndexPoll = cmp.Or(o.IndexPoll, -1)
	}
	s, err := redis.Open(context.Background(), c, &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// rawClient is a client of the database open took last.
func rawClient() *goredis.Client {
	return goredis.NewClient(&goredis.Options{Network: "unix", Addr: server.socket, DB: int(server.nextDB.Load() % databases)})
}

// openAgain opens another store on the database open took last, as a
// second partmap server sharing the Redis would.
func openAgain(t *testing.T, opts *redis.Options) *redis.Store {
	t.Helper()
	return mustOpen(t, rawClient(), opts)
}

func TestConformance(t *testing.T) {
	storetest.RunStore(t, func(t *testing.T) partmap.Store { return open(t, nil) })
}

func TestSearchIndexConformance(t *testing.T) {
	storetest.RunSearchIndexes(t, func(t *testing.T) partmap.Store { return open(t, nil) })
}

func TestDeleteAll(t *testing.T) {
	storetest.RunDeleteAll(t, func(t *testing.T) storetest.EmptierStore { return open(t, nil) })
}

func TestEngine(t *testing.T) {
	storetest.RunEngine(t, func(t *testing.T, wait time.Duration) *engine.Engine {
		return open(t, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: wait}}).Engine()
	})
}

// The model on 16 partitions: its every check lists the directory, and
// a listing on Redis reads each partition.
func TestModel(t *testing.T) {
	storetest.RunModel(t, func(t *testing.T) partmap.Store { return open(t, modelOptions()) })
}

func modelOptions() *redis.Options {
	o := redis.Options{}
	o.Partitions = 16
	return &o
}

// openShared returns two stores on one emptied database, as two partmap
// servers sharing a Redis would be.
func openShared(t *testing.T, opts *redis.Options) (*redis.Store, *redis.Store) {
	t.Helper()
	a := open(t, opts)
	return a, openAgain(t, opts)
}

// Two servers on one Redis serialise their writes through the locks in
// Redis: the history of clients split between them is linearizable.
func TestTwoServersAreLinearizable(t *testing.T) {
	a, b := openShared(t, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}})
	if _, err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	history := storetest.RecordHistory(t, func(i int) partmap.Store {
		if i%2 == 0 {
			return a
		}
		return b
	}, storetest.LinearizabilityOptions{Clients: 8, OpsPerClient: 150, Emails: 3})
	if res := storetest.CheckHistory(t, history); res != porcupine.Ok {
		t.Fatalf("porcupine: %v", res)
	}
}

// A writer whose lock was lost cannot commit, even though it got as far as
// the commit: another server may hold the partition now. (A live holder
// renews its locks, so the loss is a failover's: the key goes.)
func TestLostLockCannotCommit(t *testing.T) {
	ctx := context.Background()
	a, b := openShared(t, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}})
	a.Start(ctx)
	const email = "slow@example.com"
	part, inv := lockedOn(email)
	raw := rawClient()
	defer raw.Close()
	err := a.Engine().Invoke(ctx, inv, func(tx *engine.Tx) error {
		if n, err := raw.Del(ctx, "{"+part.Partition.String()+"}::lock").Result(); err != nil || n != 1 {
			t.Fatalf("deleting the held lock: %v %v", n, err)
		}
		if _, _, err := partmap.UpsertProfile(ctx, b, partmap.Profile{partmap.FieldEmail: email, "fullName": "b"}, partmap.Condition{}); err != nil {
			t.Errorf("the other server could not write after the lock was lost: %v", err)
		}
		return tx.Put(part, email, partmap.Record{Profile: partmap.Profile{partmap.FieldEmail: email, "fullName": "a"}, Version: 1}, partmap.OpPut)
	})
	if !errors.Is(err, partmap.ErrLockConflict) {
		t.Fatalf("commit under a lost lock: got %v, want a lock conflict", err)
	}
	if rec, err := b.FindProfile(ctx, email); err != nil || rec.Profile["fullName"] != "b" {
		t.Fatalf("after the refused commit: %v, %v", rec.Profile, err)
	}
}

// A lock outlives the TTL while its holder lives: the holder renews it,
// so a long hold (a big partition's copy) keeps its partition.
func TestLockRenewedWhileHeld(t *testing.T) {
	ctx := context.Background()
	a, b := openShared(t, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}, LockTTL: 200 * time.Millisecond})
	a.Start(ctx)
	const email = "long@example.com"
	part, inv := lockedOn(email)
	err := a.Engine().Invoke(ctx, inv, func(tx *engine.Tx) error {
		time.Sleep(time.Second) // five TTLs
		if _, _, err := partmap.UpsertProfile(ctx, b, partmap.Profile{partmap.FieldEmail: email, "fullName": "b"}, partmap.Condition{}); !errors.Is(err, partmap.ErrLockConflict) {
			t.Errorf("another server wrote a partition whose lock is held past its TTL: %v", err)
		}
		return tx.Put(part, email, partmap.Record{Profile: partmap.Profile{partmap.FieldEmail: email, "fullName": "a"}, Version: 1}, partmap.OpPut)
	})
	if err != nil {
		t.Fatalf("commit under a renewed lock: %v", err)
	}
	if rec, err := b.FindProfile(ctx, email); err != nil || rec.Profile["fullName"] != "a" {
		t.Fatalf("after the commit: %v, %v", rec.Profile, err)
	}
}

// A renewal that must wait for a connection (every one of the client's
// busy, as under a resize's or an export's load on a busy machine) waits
// while the locks may still hold, rather than giving up after a third of
// the TTL: TestExportOutlivesLockTTL lost its locks so under load, and
// other servers' writes got in.
func TestLockRenewedThroughBusyConnections(t *testing.T) {
	ctx := context.Background()
	const ttl = 1500 * time.Millisecond
	db := int(server.nextDB.Add(1) % databases)
	c := goredis.NewClient(&goredis.Options{Network: "unix", Addr: server.socket, DB: db,
		PoolSize: 1, PipelinePoolSize: 1, PoolTimeout: time.Minute})
	if err := c.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	s := mustOpen(t, c, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1, SweepInterval: -1, FeedTrimInterval: -1}, LockTTL: ttl, FinishInterval: -1})
	s.Start(ctx)
	const email = "patient@example.com"
	part, inv := lockedOn(email)
	err := s.Engine().Invoke(ctx, inv, func(tx *engine.Tx) error {
		// Both connections are busy from before the first renewal (at
		// ttl/3) until over a third of the TTL after it, but not past the
		// TTL.
		time.Sleep(ttl / 3 * 4 / 5)
		block := fmt.Sprintf("%.3f", (ttl * 3 / 5).Seconds())
		var wg sync.WaitGroup
		wg.Go(func() { c.Do(ctx, "BLPOP", "nothing-comes", block) })
		wg.Go(func() {
			pipe := c.Pipeline()
			pipe.Do(ctx, "BLPOP", "nothing-comes-either", block)
			pipe.Exec(ctx)
		})
		wg.Wait()
		time.Sleep(ttl) // past the TTL the lock was taken with
		return tx.Put(part, email, partmap.Record{Profile: partmap.Profile{partmap.FieldEmail: email}, Version: 1}, partmap.OpPut)
	})
	if err != nil {
		t.Fatalf("commit under a lock renewed late: %v", err)
	}
}

func TestResize(t *testing.T) {
	storetest.RunResize(t, func(t *testing.T) partmap.Store {
		return open(t, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}})
	})
}

// One server resizes while another, which learns of it only from the
// partitions' marks, keeps writing: the clients of both make one
// linearizable history, and the other server ends on the new layout.
func TestResizeSeenByAnotherServer(t *testing.T) {
	ctx := context.Background()
	a, b := openShared(t, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}})
	if _, err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var profiles []partmap.Profile
	for i := range 2000 {
		profiles = append(profiles, partmap.Profile{partmap.FieldEmail: fmt.Sprintf("p%d@example.com", i), "customerTier": "gold"})
	}
	if _, err := a.UpsertProfiles(ctx, profiles); err != nil {
		t.Fatal(err)
	}
	// c opens before the resize and does nothing until it is over: its
	// first read and write meet the retired version's marks.
	c := openAgain(t, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}})
	var done atomic.Bool
	historyDone := make(chan []porcupine.Operation)
	go func() {
		historyDone <- storetest.RecordHistory(t, func(i int) partmap.Store {
			if i%2 == 0 {
				return a
			}
			return b
		}, storetest.LinearizabilityOptions{Clients: 8, OpsPerClient: 40, Emails: 6, Until: done.Load})
	}()
	if _, err := a.Resize(ctx, 250); err != nil {
		t.Fatal(err)
	}
	storetest.WaitResized(t, a)
	done.Store(true)
	if res := storetest.CheckHistory(t, <-historyDone); res != porcupine.Ok {
		t.Fatalf("history across a resize seen by two servers: %v", res)
	}
	for _, s := range []partmap.Store{a, b} {
		page, err := s.ListProfiles(ctx, partmap.ListOptions{Where: []partmap.Match{{Field: "customerTier", Value: "gold"}}, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		n := len(page.Profiles)
		for page.NextCursor != "" {
			if page, err = s.ListProfiles(ctx, partmap.ListOptions{Cursor: page.NextCursor, Limit: 1000, Where: []partmap.Match{{Field: "customerTier", Value: "gold"}}}); err != nil {
				t.Fatal(err)
			}
			n += len(page.Profiles)
		}
		stats, err := s.ListPartitions(ctx)
		if err != nil || stats.TotalPartitions != 250 || n != 2000 {
			t.Fatalf("after the resize: %d partitions, %d gold profiles, %v", stats.TotalPartitions, n, err)
		}
	}
	storetest.CheckAll(t, b)

	if rec, err := c.FindProfile(ctx, "p7@example.com"); err != nil || rec.Profile["customerTier"] != "gold" {
		t.Fatalf("a read by a server that missed the resize: %v %v", rec, err)
	}
	stale := openAgain(t, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}})
	staleBulk := openAgain(t, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}})
	if _, err := a.Resize(ctx, 40); err != nil {
		t.Fatal(err)
	}
	storetest.WaitResized(t, a)
	// Fail-fast locks: the resize may still be releasing its own.
	_, _, err := partmap.UpsertProfile(ctx, stale, partmap.Profile{partmap.FieldEmail: "late@example.com", "customerTier": "gold"}, partmap.Condition{})
	for try := 0; errors.Is(err, partmap.ErrLockConflict) && try < 100; try++ {
		time.Sleep(20 * time.Millisecond)
		_, _, err = partmap.UpsertProfile(ctx, stale, partmap.Profile{partmap.FieldEmail: "late@example.com", "customerTier": "gold"}, partmap.Condition{})
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.FindProfile(ctx, "late@example.com"); err != nil {
		t.Fatalf("a write by a server that missed the resize is lost: %v", err)
	}
	// A bulk write reads its partitions in batches, which must notice the
	// resize too: a retired version answers no read.
	p7 := engine.Part{Partition: 7}
	err = staleBulk.Engine().Invoke(ctx, engine.Invocation{Load: []engine.Part{p7}}, func(tx *engine.Tx) error {
		return tx.Prefetch(p7, []string{"p7@example.com", "q7@example.com"})
	})
	if !errors.Is(err, engine.ErrStale) {
		t.Fatalf("a batch read of a retired version: %v, want ErrStale", err)
	}
	var bulk []partmap.Profile
	for i := range 50 {
		bulk = append(bulk, partmap.Profile{partmap.FieldEmail: fmt.Sprintf("late%d@example.com", i)})
	}
	for try := 0; len(bulk) > 0 && try < 100; try++ {
		res, err := staleBulk.UpsertProfiles(ctx, bulk)
		if err != nil {
			t.Fatal(err)
		}
		var again []partmap.Profile
		for i, r := range res {
			switch {
			case errors.Is(r.Err, partmap.ErrLockConflict):
				again = append(again, bulk[i])
			case r.Err != nil:
				t.Fatal(r.Err)
			case !r.Created:
				t.Fatalf("%s: replaced, want created", bulk[i].Email())
			default:
				if _, err := a.FindProfile(ctx, bulk[i].Email()); err != nil {
					t.Fatalf("a bulk write by a server that missed the resize is lost: %v", err)
				}
			}
		}
		bulk = again
		time.Sleep(20 * time.Millisecond)
	}
	if len(bulk) > 0 {
		t.Fatalf("%d profiles still meet lock conflicts", len(bulk))
	}
}

// The whole-map lock is the store's, not its server's: another server
// sees it and honours it, and releases it with the lease once the server
// that took it is gone; a server that opens meanwhile honours it too.
func TestWholeMapLockOutlivesItsServer(t *testing.T) {
	ctx := context.Background()
	a, b := openShared(t, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}})
	if _, err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	alice := partmap.Profile{partmap.FieldEmail: "alice@example.com"}
	lock, err := a.LockWholeMap(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	a.Close() // the server that took it goes away without releasing it

	var e *partmap.Error
	if _, _, err := partmap.UpsertProfile(ctx, b, alice, partmap.Condition{}); !errors.As(err, &e) || e.Code != partmap.ELOCKCONFLICT ||
		!strings.Contains(e.Message, "whole map is locked") || e.RetryAfter < 50*time.Second {
		t.Fatalf("a write through another server: %v; want a conflict that names the whole-map lock and its end", err)
	}
	if _, err := b.LockWholeMap(ctx, time.Minute); !errors.Is(err, partmap.ErrLockConflict) {
		t.Fatalf("a second whole-map lock through another server: %v, want a conflict", err)
	}
	c := openAgain(t, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}})
	if _, _, err := partmap.UpsertProfile(ctx, c, alice, partmap.Condition{}); !errors.Is(err, partmap.ErrLockConflict) {
		t.Fatalf("a write through a server opened under the lock: %v, want a conflict", err)
	}
	if err := b.UnlockWholeMap(ctx, "not-the-lease"); !errors.Is(err, partmap.ErrNotFound) {
		t.Fatalf("a release with the wrong lease: %v, want not-found", err)
	}
	if err := b.UnlockWholeMap(ctx, lock.Lease); err != nil {
		t.Fatalf("a release through another server: %v", err)
	}
	for _, s := range []*redis.Store{b, c} {
		if _, _, err := partmap.UpsertProfile(ctx, s, alice, partmap.Condition{}); err != nil {
			t.Fatalf("a write after the release: %v", err)
		}
	}
	if err := c.UnlockWholeMap(ctx, lock.Lease); !errors.Is(err, partmap.ErrNotFound) {
		t.Fatalf("a second release: %v, want not-found", err)
	}
	// And the lock can be taken again, through any server.
	again, err := c.LockWholeMap(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.UnlockWholeMap(ctx, again.Lease); err != nil {
		t.Fatal(err)
	}
}

func TestExpiryModel(t *testing.T) {
	storetest.RunExpiryModel(t, func(t *testing.T, clock func() time.Time) (partmap.Store, func(context.Context) error) {
		opts := redis.Options{}
		opts.Clock, opts.SweepInterval = clock, -1
		s := open(t, &opts)
		startOn16(t, s)
		return s, sweeper(s)
	})
}

// startOn16 starts s and resizes it to 16 partitions, as on Pebble: a
// check that reads every partition, as the expiry checks do, stays quick.
func startOn16(t *testing.T, s *redis.Store) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resize(ctx, 16); err != nil {
		t.Fatal(err)
	}
	storetest.WaitResized(t, s)
}

func sweeper(s *redis.Store) func(context.Context) error {
	return func(ctx context.Context) error { _, err := s.Sweep(ctx); return err }
}

func clocked(clock func() time.Time) *redis.Options {
	o := redis.Options{}
	o.Clock, o.SweepInterval = clock, -1 // the suite sweeps when it says
	return &o
}

func TestExpiry(t *testing.T) {
	var dbs sync.Map // *redis.Store → its database
	storetest.RunExpiry(t, func(t *testing.T, clock func() time.Time) (partmap.Store, func(context.Context) error) {
		s := open(t, clocked(clock))
		dbs.Store(s, int(server.nextDB.Load()%databases))
		return s, sweeper(s)
	}, func(t *testing.T, old partmap.Store, clock func() time.Time) (partmap.Store, func(context.Context) error) {
		db, _ := dbs.Load(old)
		if err := old.(*redis.Store).Close(); err != nil {
			t.Fatal(err)
		}
		c := goredis.NewClient(&goredis.Options{Network: "unix", Addr: server.socket, DB: db.(int)})
		s := mustOpen(t, c, clocked(clock))
		dbs.Store(s, db)
		return s, sweeper(s)
	})
}

// Two servers on one Redis may sweep at once: each expired profile is
// deleted, and counted, once, and nothing drifts.
func TestTwoSweepers(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(storetest.T0)
	a, b := openShared(t, clocked(clock.Now))
	for _, s := range []*redis.Store{a, b} {
		if _, err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	const n = 60
	emails := storetest.Spread(n, "two")
	for i, e := range emails {
		if _, _, err := partmap.UpsertProfile(ctx, a, partmap.Profile{partmap.FieldEmail: e, "a": "1", "b": "2"}, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
		op := partmap.Operation{Op: partmap.OpExpire, Email: e, When: partmap.When{Millis: storetest.T0 + 1000}}
		if i%2 == 1 {
			op.Fields = []string{"a"}
		}
		if _, err := b.Apply(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	clock.Set(storetest.T0 + 1000)
	var wg sync.WaitGroup
	stats := make(chan [2]int, 8)
	for i := range 8 {
		s := []*redis.Store{a, b}[i%2]
		wg.Go(func() {
			// A pass that meets the other server's lock fails, as any
			// write may; what it reclaimed before counts, and the next
			// pass goes on.
			var got [2]int
			for {
				st, err := s.Sweep(ctx)
				got[0], got[1] = got[0]+st.Profiles, got[1]+st.Records
				if err == nil {
					break
				}
				if !errors.Is(err, partmap.ErrLockConflict) {
					t.Error(err)
					break
				}
			}
			stats <- got
		})
	}
	wg.Wait()
	close(stats)
	var profiles, records int
	for st := range stats {
		profiles += st[0]
		records += st[1]
	}
	if profiles != n/2 || records != n/2 {
		t.Fatalf("the sweeps reclaimed %d profiles and %d records, want %d and %d", profiles, records, n/2, n/2)
	}
	for i, e := range emails {
		rec, err := b.FindProfile(ctx, e)
		switch {
		case i%2 == 0 && !errors.Is(err, partmap.ErrNotFound):
			t.Fatalf("%s: %v, want not-found", e, err)
		case i%2 == 1 && (err != nil || len(rec.Profile) != 2):
			t.Fatalf("%s: %v, %v", e, rec.Profile, err)
		}
	}
	stats2, err := a.ListPartitions(ctx)
	if err != nil || stats2.TotalProfiles != n/2 {
		t.Fatalf("partitions: %d profiles, %v; want %d", stats2.TotalProfiles, err, n/2)
	}
	storetest.CheckAll(t, a)
}
