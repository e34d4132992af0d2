package redis_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/redis"
)

// sharedStores opens n stores on one directory, as n partmap servers
// sharing a Redis are: on an emptied database of the lone server, or in a
// namespace of their own on the cluster.
func sharedStores(t *testing.T, onCluster bool, n int, opts redis.Options) []*redis.Store {
	t.Helper()
	var clients []goredis.UniversalClient
	if onCluster {
		opts.Namespace = fmt.Sprintf("t%d", cluster.ns.Add(1))
		for range n {
			clients = append(clients, goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: cluster.Addrs}))
		}
	} else {
		db := int(server.nextDB.Add(1) % databases)
		for range n {
			clients = append(clients, goredis.NewClient(&goredis.Options{Network: "unix", Addr: server.socket, DB: db}))
		}
		if err := clients[0].FlushDB(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var out []*redis.Store
	for _, c := range clients {
		s := mustOpen(t, c, &opts)
		out = append(out, s)
	}
	if _, err := out[0].Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return out
}

// Under load, through three servers sharing one Redis, each sweeping at
// the default interval, every profile and field deadline is swept (its
// expired change in the feed, the profile deleted, the partition counts
// right) within 2 s of its deadline, as the feed's commit times show. The
// backstop is off: only the hints can lead a sweeper to a deadline, so a
// hint that a race between writers and sweepers lost would leave its
// deadline unswept.
func TestSweepsUnderLoad(t *testing.T)        { onServer(t, sweepsUnderLoad) }
func TestClusterSweepsUnderLoad(t *testing.T) { onCluster(t, sweepsUnderLoad) }

func sweepsUnderLoad(t *testing.T, open opener) {
	ctx := context.Background()
	opts := redis.Options{}
	opts.BackstopRate, opts.LockWait = -1, time.Second
	stores := sharedStores(t, isCluster(t), 3, opts)
	stop := make(chan struct{})
	var load sync.WaitGroup
	var writes atomic.Int64
	for w := range 6 {
		load.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 32))
			for i := 0; ; i++ {
				select {
				case <-stop:
					writes.Add(int64(i))
					return
				default:
				}
				s := stores[rng.IntN(len(stores))]
				e := fmt.Sprintf("load%d@example.com", rng.IntN(2000))
				_, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: e, "n": fmt.Sprint(i)}, partmap.Condition{})
				if err != nil && !errors.Is(err, partmap.ErrLockConflict) {
					t.Error(err)
					return
				}
			}
		})
	}
	type doomed struct {
		email    string
		deadline int64
		profile  bool // the profile's deadline, else field a's
	}
	var mu sync.Mutex
	var all []doomed
	var expirers sync.WaitGroup
	for si, s := range stores {
		expirers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(si), 33))
			for i := range 40 {
				e := fmt.Sprintf("doomed%d-%d@example.com", si, i)
				if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: e, "a": "1", "b": "2"}, partmap.Condition{}); err != nil {
					t.Error(err)
					return
				}
				d := doomed{email: e, deadline: time.Now().UnixMilli() + 100 + rng.Int64N(1400), profile: i%2 == 0}
				op := partmap.Operation{Op: partmap.OpExpire, Email: e, When: partmap.When{Millis: d.deadline}}
				if !d.profile {
					op.Fields = []string{"a"}
				}
				if _, err := s.Apply(ctx, op); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				all = append(all, d)
				mu.Unlock()
				time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
			}
		})
	}
	expirers.Wait()
	last := int64(0)
	for _, d := range all {
		last = max(last, d.deadline)
	}
	time.Sleep(time.Until(time.UnixMilli(last).Add(2500 * time.Millisecond)))
	close(stop)
	load.Wait()
	if t.Failed() {
		return
	}
	changes, _ := readFeed(t, stores[1], "", partmap.MaxChangesPage)
	swept := map[string]partmap.Change{}
	for _, c := range changes {
		if _, ok := swept[c.Email]; c.Op == partmap.OpExpired && !ok {
			swept[c.Email] = c
		}
	}
	var worst time.Duration
	for _, d := range all {
		c, ok := swept[d.email]
		switch {
		case !ok:
			t.Errorf("%s (deadline %d, profile %v): never swept", d.email, d.deadline, d.profile)
			continue
		case d.profile && c.Record != nil:
			t.Errorf("%s: the profile's deadline passed, and its sweep kept %v", d.email, c.Record.Profile)
		case !d.profile && (c.Record == nil || c.Record.Profile["a"] != "" || c.Record.Profile["b"] != "2"):
			t.Errorf("%s: field a's deadline passed, and its sweep left %v", d.email, c.Record)
		}
		late := c.Time.Sub(time.UnixMilli(d.deadline))
		worst = max(worst, late)
		if late < 0 || late > 2*time.Second {
			t.Errorf("%s: swept %v after its deadline; want within 2 s", d.email, late)
		}
	}
	t.Logf("%d deadlines swept, the latest %v after its deadline, beside %d writes of the load", len(all), worst, writes.Load())
	// The stored counts hold no expired profile.
	var stored int64
	if err := stores[2].CheckPartitions(ctx, 0, 0, func(c partmap.PartitionCheck) error {
		stored += c.Counted
		if !c.OK() {
			t.Errorf("check: %+v", c)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	st, err := stores[0].ListPartitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if stored != st.TotalProfiles {
		t.Errorf("the partitions store %d profiles, %d of them live: the sweeps left some", stored, st.TotalProfiles)
	}
}

// A deadline whose hint is lost (a writer killed before it wrote it, a
// failover of the hint set's master) is swept all the same: here the
// hints are deleted outright. A server that starts reads every partition
// at once, as a server restarted after its crash would.
func TestBackstopAtStart(t *testing.T)        { onServer(t, backstopAtStart) }
func TestClusterBackstopAtStart(t *testing.T) { onCluster(t, backstopAtStart) }

func backstopAtStart(t *testing.T, _ opener) {
	opts := redis.Options{}
	opts.BackstopRate = -1
	s := sharedStores(t, isCluster(t), 1, opts)[0]
	deadline := loseHints(t, s, 20)
	time.Sleep(time.Until(time.UnixMilli(deadline).Add(time.Second)))
	if n := storedProfiles(t, s); n != 20 {
		t.Fatalf("%d profiles stored before the backstop ran; want the 20 whose hints were lost", n)
	}
	// A round of the paced backstop takes 1,000 s here.
	mustOpen(t, clientFor(isCluster(t)), &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}, Namespace: s.Namespace(), BackstopRate: 1})
	waitSwept(t, s)
}

// The same, found by the paced rounds of a running server's backstop, a
// thousand partitions a second here.
func TestBackstopRounds(t *testing.T)        { onServer(t, backstopRounds) }
func TestClusterBackstopRounds(t *testing.T) { onCluster(t, backstopRounds) }

func backstopRounds(t *testing.T, _ opener) {
	opts := redis.Options{}
	opts.BackstopRate = 1000
	s := sharedStores(t, isCluster(t), 1, opts)[0]
	loseHints(t, s, 20)
	waitSwept(t, s)
}

// loseHints writes n profiles with a deadline 1.5 s ahead, in partitions
// of their own, and deletes their hints; it returns the deadline.
func loseHints(t *testing.T, s *redis.Store, n int) int64 {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(1500 * time.Millisecond).UnixMilli()
	for _, e := range spread("lost-hint", n) {
		if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: e}, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Apply(ctx, partmap.Operation{Op: partmap.OpExpire, Email: e, When: partmap.When{Millis: deadline}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.FlushHints(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rawClientFor(t, isCluster(t)).Del(ctx, "partmap:"+s.Namespace()+":due").Err(); err != nil {
		t.Fatal(err)
	}
	if time.Now().UnixMilli() >= deadline {
		t.Fatal("the deadline passed before the hints were deleted (a slow machine): nothing tested")
	}
	return deadline
}

// waitSwept waits until s's partitions store no profile, for 10 s at most.
func waitSwept(t *testing.T, s *redis.Store) {
	t.Helper()
	for until := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		n := storedProfiles(t, s)
		if n == 0 {
			return
		}
		if time.Now().After(until) {
			t.Fatalf("%d profiles whose hints were lost are still stored after 10 s", n)
		}
	}
}

func isCluster(t *testing.T) bool { return strings.Contains(t.Name(), "/Cluster") }

// storedProfiles is how many profiles s's partitions store, swept or not.
func storedProfiles(t *testing.T, s *redis.Store) int {
	t.Helper()
	var n int64
	if err := s.CheckPartitions(context.Background(), 0, 0, func(c partmap.PartitionCheck) error {
		n += c.Counted
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return int(n)
}

func clientFor(onCluster bool) goredis.UniversalClient {
	if onCluster {
		return goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: cluster.Addrs})
	}
	return rawClient()
}

func rawClientFor(t *testing.T, onCluster bool) goredis.UniversalClient {
	c := clientFor(onCluster)
	t.Cleanup(func() { c.Close() })
	return c
}

// A transaction whose committer is SIGKILLed after any step of its
// protocol is ended, intents and record, though nobody reads or writes
// its partitions: a server that only runs its finisher (no backstop)
// finds it through the hints the committer wrote before its first
// intent, within about two lock TTLs of the kill.
func TestTxCrashUntouched(t *testing.T) {
	t.Run("Server", func(t *testing.T) { txCrashUntouched(t, false) })
}
func TestClusterTxCrashUntouched(t *testing.T) {
	t.Run("Cluster", func(t *testing.T) { txCrashUntouched(t, true) })
}

func txCrashUntouched(t *testing.T, onCluster bool) {
	for _, step := range []string{"primary:1", "prepared:1", "decided:1", "rolled:1", "rolled:3"} {
		t.Run(strings.Replace(step, ":", "", 1), func(t *testing.T) {
			ctx := context.Background()
			var env string
			var keys func(pattern string) []string
			if onCluster {
				ns := fmt.Sprintf("t%d", cluster.ns.Add(1))
				env = fmt.Sprintf("cluster:%s:%s", ns, strings.Join(cluster.Addrs, ","))
				keys = func(pattern string) []string { return clusterKeys(t, ns, pattern) }
			} else {
				db := int(server.nextDB.Add(1) % databases)
				c := goredis.NewClient(&goredis.Options{Network: "unix", Addr: server.socket, DB: db})
				if err := c.FlushDB(ctx).Err(); err != nil {
					t.Fatal(err)
				}
				c.Close()
				env = fmt.Sprintf("unix:%s:%d", server.socket, db)
				keys = func(pattern string) []string { return singleKeys(t, db, pattern) }
			}
			s, err := openEnv(env)
			if err != nil {
				t.Fatal(err)
			}
			s.Start(ctx)
			for _, x := range crashAccounts[:3] {
				if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: x, "balance": "100", "customerTier": "gold"}, partmap.Condition{}); err != nil {
					t.Fatal(err)
				}
			}
			s.Close()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), crashEnv+"="+step, crashStoreEnv+"="+env)
			if out, err := cmd.CombinedOutput(); !strings.Contains(fmt.Sprint(err), "killed") {
				t.Fatalf("the committer was not killed: %v\n%s", err, out)
			}
			killed := time.Now()
			if len(keys("*tx:*")) == 0 {
				t.Fatal("the committer left no transaction record: nothing to end")
			}
			fresh, err := openEnvWith(env, func(o *redis.Options) { o.BackstopRate = -1 })
			if err != nil {
				t.Fatal(err)
			}
			defer fresh.Close()
			for {
				left := append(keys("*pending"), keys("*tx:*")...)
				if len(left) == 0 {
					break
				}
				if time.Since(killed) > 10*time.Second {
					t.Fatalf("10 s after the kill, left behind: %v", left)
				}
				time.Sleep(20 * time.Millisecond)
			}
			t.Logf("ended %v after the kill (the lock TTL is %v)", time.Since(killed).Round(time.Millisecond), crashTTL)
			// Whole or not at all.
			got := map[string]string{}
			for _, x := range crashAccounts {
				r, err := fresh.FindProfile(ctx, x)
				switch {
				case errors.Is(err, partmap.ErrNotFound):
					got[x] = "-"
				case err != nil:
					t.Fatal(err)
				default:
					got[x] = r.Profile["balance"]
				}
			}
			a, b, c, d := crashAccounts[0], crashAccounts[1], crashAccounts[2], crashAccounts[3]
			want := map[string]string{a: "100", b: "100", c: "100", d: "-"}
			if step != "primary:1" && step != "prepared:1" {
				want = map[string]string{a: "90", b: "110", c: "-", d: "0"}
			}
			if !maps.Equal(got, want) {
				t.Errorf("after the end: %v, want %v", got, want)
			}
		})
	}
}

// Writers and sweepers of three servers race on the hints of the same
// partitions: each writer gives one partition a profile with a deadline
// a few milliseconds ahead, writes its hint at once, and as soon as a
// sweep has deleted it (before that sweep has released its claim, often)
// writes the next. With the backstop off, a hint lost to the race (a
// release that deleted a hint written since its claim, say) would leave
// its profile stored for good.
func TestHintRaces(t *testing.T) {
	onBoth(t, func(t *testing.T, _ opener) {
		ctx := context.Background()
		opts := redis.Options{}
		opts.BackstopRate, opts.SweepInterval, opts.LockWait = -1, 2*time.Millisecond, time.Second
		stores := sharedStores(t, isCluster(t), 3, opts)
		raw := rawClientFor(t, isCluster(t))
		ns := stores[0].Namespace()
		var wg sync.WaitGroup
		for w, e := range spread("race", 8) {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(w), 34))
				key := fmt.Sprintf("{%s}:%s:r:%s", partOf(e).Partition, ns, e)
				for episode := range 25 {
					s := stores[rng.IntN(len(stores))]
					if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: e, "n": fmt.Sprint(episode)}, partmap.Condition{}); err != nil {
						t.Error(err)
						return
					}
					deadline := time.Now().UnixMilli() + 1 + rng.Int64N(10)
					if _, err := s.Apply(ctx, partmap.Operation{Op: partmap.OpExpire, Email: e, When: partmap.When{Millis: deadline}}); err != nil {
						t.Error(err)
						return
					}
					if err := s.FlushHints(ctx); err != nil {
						t.Error(err)
						return
					}
					for until := time.Now().Add(10 * time.Second); ; {
						n, err := raw.Exists(ctx, key).Result()
						if err != nil {
							t.Error(err)
							return
						}
						if n == 0 {
							break
						}
						if time.Now().After(until) {
							t.Errorf("%s, episode %d: still stored 10 s after its deadline %d passed: its hint was lost", e, episode, deadline)
							return
						}
					}
				}
			})
		}
		wg.Wait()
	})
}

// A feed nobody writes any more is trimmed by age all the same: once the
// clock passes its events' age, the backstop finds each stream past it
// and hints it, and the trimmer, which otherwise trims only the streams
// written since, trims it. The trimmer here trims every 100 ms, and the
// backstop reads a thousand partitions a second.
func TestBackstopTrimsIdleFeed(t *testing.T) {
	onBoth(t, func(t *testing.T, _ opener) {
		ctx := context.Background()
		var now atomic.Int64
		now.Store(time.Now().UnixMilli())
		opts := redis.Options{}
		opts.Clock = func() time.Time { return time.UnixMilli(now.Load()) }
		opts.FeedRetention = &partmap.Retention{Age: time.Hour}
		opts.FeedTrimInterval, opts.BackstopRate = 100*time.Millisecond, 1000
		s := sharedStores(t, isCluster(t), 1, opts)[0]
		for _, e := range spread("aged", 20) {
			if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: e}, partmap.Condition{}); err != nil {
				t.Fatal(err)
			}
		}
		if changes, _ := readFeed(t, s, "", 100); len(changes) != 20 {
			t.Fatalf("the feed holds %d changes, want 20", len(changes))
		}
		time.Sleep(500 * time.Millisecond) // the trimmer has claimed what the writes hinted
		now.Add(2 * time.Hour.Milliseconds())
		for until := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			changes, _ := readFeed(t, s, "", 100)
			if len(changes) == 0 {
				return
			}
			if time.Now().After(until) {
				t.Fatalf("the feed still holds %d changes older than its retention after 10 s", len(changes))
			}
		}
	})
}

// The trimmer keeps the retention's count on the streams written since
// its last trim, which the writers' hints name: here a count of 1,000
// over 1,000 partitions, one event a stream.
func TestTrimmerTrimsWrittenFeeds(t *testing.T) {
	onBoth(t, func(t *testing.T, _ opener) {
		ctx := context.Background()
		opts := redis.Options{}
		opts.FeedRetention = &partmap.Retention{Events: partmap.DefaultPartitions}
		opts.FeedTrimInterval, opts.BackstopRate = 100*time.Millisecond, -1
		s := sharedStores(t, isCluster(t), 1, opts)[0]
		time.Sleep(300 * time.Millisecond) // past the first, whole, trim
		emails := spread("counted", 5)
		for i := range 5 {
			for _, e := range emails {
				if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: e, "n": fmt.Sprint(i)}, partmap.Condition{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		for until := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			changes, _ := readFeed(t, s, "", 100)
			if len(changes) == len(emails) {
				for _, c := range changes {
					if c.Record == nil || c.Record.Profile["n"] != "4" {
						t.Fatalf("kept %v, want each profile's last change", c.Record)
					}
				}
				return
			}
			if time.Now().After(until) {
				t.Fatalf("the feed holds %d changes of %d streams after 10 s; want one a stream", len(changes), len(emails))
			}
		}
	})
}
