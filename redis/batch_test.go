package redis_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/redis"
)

// counter reads one of the store's counters by name.
func counter(t *testing.T, s *redis.Store, name string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Collectors()...)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// Concurrent lookups and commits share round trips: 64 clients at once
// send their commands in pipelines of several, every command is sent
// exactly once (Redis's own count agrees), and every reply reaches the
// caller that asked: each client reads back what it alone wrote.
func TestConcurrentCommandsShareRoundTrips(t *testing.T) {
	ctx := context.Background()
	s, stats, _ := startedOwnServer(t)
	// The script loaded first, so that every commit is one EVALSHA.
	if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: "warm@example.com"}, partmap.Condition{}); err != nil {
		t.Fatal(err)
	}
	before := commandStats(t, stats)
	trips0 := counter(t, s, "partmap_redis_round_trips_total")
	cmds0 := counter(t, s, "partmap_redis_batched_commands_total")

	const clients, rounds = 64, 20
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Go(func() {
			email := fmt.Sprintf("client%d@example.com", c)
			for r := range rounds {
				want := fmt.Sprint(r)
				if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: email, "round": want}, partmap.Condition{}); err != nil {
					errs <- err
					return
				}
				got, err := s.FindProfile(ctx, email)
				if err != nil {
					errs <- err
					return
				}
				if got.Profile["round"] != want {
					errs <- fmt.Errorf("%s: read round %q after writing %q: a reply went to the wrong caller", email, got.Profile["round"], want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	after := commandStats(t, stats)
	// Each upsert is an MGET and an EVALSHA, each lookup an MGET.
	const upserts, lookups = clients * rounds, clients * rounds
	if n := after["mget"] - before["mget"]; n != upserts+lookups {
		t.Errorf("Redis ran %d MGETs, want %d", n, upserts+lookups)
	}
	if n := after["evalsha"] - before["evalsha"]; n != upserts {
		t.Errorf("Redis ran %d EVALSHAs, want %d", n, upserts)
	}
	trips := counter(t, s, "partmap_redis_round_trips_total") - trips0
	cmds := counter(t, s, "partmap_redis_batched_commands_total") - cmds0
	if cmds != 2*upserts+lookups {
		t.Errorf("the batcher counted %v commands, want %d", cmds, 2*upserts+lookups)
	}
	if trips >= cmds {
		t.Errorf("%v commands took %v round trips: no pipeline carried more than one", cmds, trips)
	}
	t.Logf("%v commands in %v round trips", cmds, trips)
}

// A Redis that has forgotten the scripts (a restart, a failover, SCRIPT
// FLUSH) answers the pipelined EVALSHAs with NOSCRIPT; the commits are
// then sent as EVAL, and each applies once.
func TestCommitAfterScriptFlush(t *testing.T) {
	ctx := context.Background()
	s, admin, _ := startedOwnServer(t)
	const email = "counter@example.com"
	if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: email}, partmap.Condition{}); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		if err := admin.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for range 16 {
			wg.Go(func() {
				// Sixteen writers of one profile may wait longer than
				// the lock wait on a loaded machine: a conflict wrote
				// nothing, and is retried for a while, as a client does.
				for tries := 1; ; tries++ {
					_, err := partmap.IncrementField(ctx, s, email, "visits", 1, partmap.Condition{})
					if partmap.ErrorCode(err) != partmap.ELOCKCONFLICT || tries == 100 {
						if err != nil {
							errs <- err
						}
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	got, err := s.FindProfile(ctx, email)
	if err != nil {
		t.Fatal(err)
	}
	if got.Profile["visits"] != "48" {
		t.Fatalf("visits = %q after 48 increments", got.Profile["visits"])
	}
}
