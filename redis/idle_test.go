package redis_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/redistest"
	"github.com/partmap/partmap/redis"
)

// idleBudget is the most commands a second an idle server may send its
// Redis, whatever its partition count.
const idleBudget = 20

// idleWindow is how long an idle server's commands are counted: long
// enough that every background loop (the trimmer's every 10 s aside) runs
// several times in it.
const idleWindow = 4 * time.Second

// An idle server, with every background loop running (sweeper, finisher,
// feed trimmer, backstop), sends its Redis at most idleBudget commands a
// second, averaged over idleWindow, with 1,000 partitions and with
// 10,000, empty or holding profiles with deadlines and a feed: MONITOR on
// a redis-server of its own counts them. Before the hints, a server with
// 1,000 partitions sent about 2,500 a second (and 100 more every tenth
// second, the feed's trim).
func TestIdleCommands(t *testing.T) {
	for _, tc := range []struct {
		partitions int
		data       bool // profiles with deadlines an hour ahead, and a feed
	}{{1000, false}, {10000, false}, {1000, true}} {
		partitions := tc.partitions
		name := fmt.Sprint(partitions)
		if tc.data {
			name += "WithData"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel() // a redis-server each, mostly idle: they overlap
			srv := redistest.StartTestServer(t)
			admin := srv.Client(t)
			// The default poll for other servers' search indexes: an idle
			// server's commands include it.
			opts := redis.Options{IndexPoll: 250 * time.Millisecond}
			opts.Partitions = partitions
			s := mustOpen(t, goredis.NewClient(&goredis.Options{Network: "unix", Addr: srv.Socket}), &opts)
			ctx := context.Background()
			if _, err := s.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if tc.data {
				var profiles []partmap.Profile
				for i := range 3000 {
					profiles = append(profiles, partmap.Profile{partmap.FieldEmail: fmt.Sprintf("idle%d@example.com", i), "a": "1"})
				}
				if _, err := s.UpsertProfiles(ctx, profiles); err != nil {
					t.Fatal(err)
				}
				for _, p := range profiles[:1000] {
					op := partmap.Operation{Op: partmap.OpExpire, Email: p.Email(), When: partmap.When{Millis: time.Now().Add(time.Hour).UnixMilli()}}
					if _, err := s.Apply(ctx, op); err != nil {
						t.Fatal(err)
					}
				}
				// What the writes left to trim is trimmed now, not in the
				// window: that is the writes' cost, not idleness's.
				if _, err := s.TrimFeed(ctx); err != nil {
					t.Fatal(err)
				}
			}
			mon := startMonitor(t, "unix", srv.Socket, admin, nil)
			checkIdle(t, []*monitor{mon})
		})
	}
}

// The same on the 3+3 cluster, counted on each master, where the store's
// commands are told from other namespaces' by its namespace in their keys.
func TestClusterIdleCommands(t *testing.T) {
	o := redis.Options{IndexPoll: 250 * time.Millisecond} // the default, as above
	o.Namespace = fmt.Sprintf("idle%d", cluster.ns.Add(1))
	s := mustOpen(t, goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: cluster.Addrs}), &o)
	if _, err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ns := ":" + o.Namespace
	mine := func(line string) bool { return strings.Contains(line, ns+":") || strings.Contains(line, ns+"@") }
	var mons []*monitor
	for _, addr := range cluster.Masters() {
		c := goredis.NewClient(&goredis.Options{Addr: addr})
		t.Cleanup(func() { c.Close() })
		mons = append(mons, startMonitor(t, "tcp", addr, c, mine))
	}
	checkIdle(t, mons)
}

// checkIdle lets the store settle (a server's first trim, and first
// round of the backstop, read every partition) until a second sees at
// most idleBudget commands, then counts what mons see over idleWindow and
// holds it to idleBudget a second.
func checkIdle(t *testing.T, mons []*monitor) {
	t.Helper()
	count := func() int {
		n := 0
		for _, m := range mons {
			n += m.count()
		}
		return n
	}
	count()
	for settle := 0; ; settle++ {
		time.Sleep(time.Second)
		if n := count(); n <= idleBudget || settle == 60 {
			break
		}
	}
	calls := func() int { // INFO commandstats, which counts what scripts run too
		n := 0
		for _, m := range mons {
			for name, c := range commandStats(t, m.c) {
				if name != "echo" && name != "monitor" {
					n += c
				}
			}
		}
		return n
	}
	before := calls()
	start := time.Now()
	time.Sleep(idleWindow)
	inner := calls() - before
	total := 0
	byCommand := map[string]int{}
	for _, m := range mons {
		n, by := m.countBy()
		total += n
		for k, v := range by {
			byCommand[k] += v
		}
	}
	rate := float64(total) / time.Since(start).Seconds()
	t.Logf("idle: %d commands in %v (%.1f/s): %v; INFO commandstats, with what scripts run: %d (%.1f/s)",
		total, time.Since(start).Round(time.Millisecond), rate, byCommand, inner, float64(inner)/time.Since(start).Seconds())
	if rate > idleBudget {
		t.Errorf("an idle server sent %.1f commands a second; want at most %d", rate, idleBudget)
	}
}
