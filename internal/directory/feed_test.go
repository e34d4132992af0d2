//go:build !fuzzsmoke

// make fuzz builds with the tag fuzzsmoke, which leaves this file out: it
// imports the Pebble and Redis stores, and the package's fuzzing binary would
// compile them again, coverage-instrumented, as test variants.

package directory_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/directory"
	"github.com/partmap/partmap/internal/redistest"
	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/pebble"
	"github.com/partmap/partmap/redis"
)

// A filtered reader that reads on until a page is caught up gets every
// change it selects once, and ends, on every store: its pages may be empty
// and not caught up while the filter passes over what it leaves out
// (feedScan events a call), but each moves on, and the last says so.
func TestChangesFilteredCaughtUp(t *testing.T) {
	const scan = 20
	directory.SetFeedScan(t, scan)
	stores := map[string]func(t *testing.T) storetest.FeedStore{
		"Pebble": func(t *testing.T) storetest.FeedStore {
			s, err := pebble.Open(t.TempDir(), &pebble.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1, Partitions: 16}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		"Redis": func(t *testing.T) storetest.FeedStore {
			srv := redistest.StartTestServer(t)
			return openRedis(t, goredis.NewClient(&goredis.Options{Network: "unix", Addr: srv.Socket}))
		},
		"Cluster": func(t *testing.T) storetest.FeedStore {
			c := redistest.StartTestCluster(t, 2*time.Second)
			return openRedis(t, goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.Addrs}))
		},
	}
	for _, name := range []string{"Pebble", "Redis", "Cluster"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := stores[name](t)
			if _, err := s.Start(ctx); err != nil {
				t.Fatal(err)
			}
			target := "target@example.com"
			p := partmap.PartitionOf(target, 16)
			write := func(email, v string) {
				t.Helper()
				if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: email, "v": v}, partmap.Condition{}); err != nil {
					t.Fatal(err)
				}
			}
			// The target's changes at both ends, and between them five
			// scans' worth of others, none in its partition.
			write(target, "first")
			others := 0
			for i := 0; others < 5*scan; i++ {
				if e := fmt.Sprintf("other%d@example.com", i); partmap.PartitionOf(e, 16) != p {
					write(e, "x")
					others++
				}
			}
			write(target, "last")
			for _, q := range []partmap.ChangeQuery{{Email: target}, {Email: target, Limit: 1}, {From: p, To: p + 1}} {
				var got []string
				empty, calls := 0, 0
				for caughtUp := false; !caughtUp; calls++ {
					if calls > 5*scan {
						t.Fatalf("%+v: %d calls and not caught up", q, calls)
					}
					page, err := s.Changes(ctx, q)
					if err != nil {
						t.Fatal(err)
					}
					for _, c := range page.Changes {
						got = append(got, c.Record.Profile["v"])
					}
					if len(page.Changes) == 0 && !page.CaughtUp {
						empty++
					}
					q.After, caughtUp = page.Next, page.CaughtUp
				}
				// 102 changes: one call to the first, five scans' worth of
				// empty pages, the last, and perhaps one more to find the end.
				if len(got) != 2 || got[0] != "first" || got[1] != "last" || empty < 3 || calls > 102/scan+3 {
					t.Fatalf("%+v: %q in %d calls, %d empty and not caught up", q, got, calls, empty)
				}
			}
		})
	}
}

func openRedis(t *testing.T, c goredis.UniversalClient) *redis.Store {
	t.Helper()
	s, err := redis.Open(context.Background(), c, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1, Partitions: 16}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
