package postgres_test

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
	"github.com/partmap/partmap/internal/pgtest"
	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/pebble"
	"github.com/partmap/partmap/postgres"
)

// A new projection copies what the directory holds, then follows a
// random workload: the table ends equal to the directory.
func TestProjectionEqualsDirectory(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(1, 2))
	pgtest.Workload(t, e.store, rng, 300, 1500) // before: copied
	r := e.project(t, postgres.Options{})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pgtest.Workload(t, e.store, rand.New(rand.NewPCG(uint64(i), 7)), 300, 1500)
		}()
	}
	wg.Wait()
	e.caughtUp(t, postgres.DefaultTable, r)
	pgtest.CheckEqual(t, e.pool, e.store, postgres.DefaultTable)
	r.stop(t)
}

// Another table, named with a schema and characters that need quoting,
// is projected beside the first, with its own cursor.
func TestTableNames(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, `CREATE SCHEMA crm`); err != nil {
		t.Fatal(err)
	}
	pgtest.Workload(t, e.store, rand.New(rand.NewPCG(3, 4)), 50, 200)
	const odd = `crm.Profiles "x"; DROP TABLE y`
	r1 := e.project(t, postgres.Options{Table: odd})
	r2 := e.project(t, postgres.Options{})
	pgtest.Workload(t, e.store, rand.New(rand.NewPCG(5, 6)), 50, 200)
	e.caughtUp(t, odd, r1)
	e.caughtUp(t, postgres.DefaultTable, r2)
	pgtest.CheckEqual(t, e.pool, e.store, `crm."Profiles ""x""; DROP TABLE y"`)
	pgtest.CheckEqual(t, e.pool, e.store, postgres.DefaultTable)
	r1.stop(t)
	r2.stop(t)

	for _, bad := range []string{"a.b.c", ".x", "x.", "with\x00nul", string(make([]byte, 64))} {
		if _, err := postgres.New(e.store, e.pool, postgres.Options{Table: bad}); partmap.ErrorCode(err) != partmap.EINVALID {
			t.Errorf("table %q: %v, want invalid", bad, err)
		}
	}
}

// U+0000, which jsonb refuses, is projected as U+FFFD rather than
// stopping the projection.
func TestNULByte(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, _, err := partmap.UpsertProfile(ctx, e.store, partmap.Profile{partmap.FieldEmail: "nul@example.com", "note": "a\x00b", "k\x00": "v"}, partmap.Condition{}); err != nil {
		t.Fatal(err)
	}
	r := e.project(t, postgres.Options{})
	if _, _, err := partmap.UpsertProfile(ctx, e.store, partmap.Profile{partmap.FieldEmail: "nul2@example.com", "note": "\x00"}, partmap.Condition{}); err != nil {
		t.Fatal(err)
	}
	e.caughtUp(t, postgres.DefaultTable, r)
	r.stop(t)
	got := pgtest.TableRows(t, e.pool, postgres.DefaultTable)
	if g := got["nul@example.com"].Profile; g["note"] != "a\uFFFDb" || g["k\uFFFD"] != "v" {
		t.Errorf("copied: %q", g)
	}
	if g := got["nul2@example.com"].Profile; g["note"] != "\uFFFD" {
		t.Errorf("followed: %q", g)
	}
}

// Stopping the projector at random points, during the copy and while it
// follows, never moves the cursor back, and the table ends equal to the
// directory.
func TestExactlyOnceAcrossCancels(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(11, 12))
	pgtest.Workload(t, e.store, rng, 2000, 6000)
	stopWatch := pgtest.WatchCursor(t, e.pool, postgres.DefaultTable)
	stopWork := pgtest.KeepWriting(t, e.store, 13, 500, 50)
	for i := range 25 {
		r := e.project(t, postgres.Options{PageSize: 1 + rng.IntN(50), Rebuild: i == 12})
		time.Sleep(time.Duration(rng.IntN(60)) * time.Millisecond)
		r.stop(t)
	}
	stopWork()
	r := e.project(t, postgres.Options{})
	e.caughtUp(t, postgres.DefaultTable, r)
	r.stop(t)
	stopWatch()
	pgtest.CheckEqual(t, e.pool, e.store, postgres.DefaultTable)
}

// A PostgreSQL restart, and a crash, meet a projector that reconnects on
// its own and catches up.
func TestPostgresRestart(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(21, 22))
	r := e.project(t, postgres.Options{PageSize: 100})
	stopWatch := pgtest.WatchCursor(t, e.pool, postgres.DefaultTable)
	pgtest.Workload(t, e.store, rng, 300, 500)
	e.caughtUp(t, postgres.DefaultTable, r)
	for _, down := range []func(){e.pg.Stop, e.pg.Crash} {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			pgtest.Workload(t, e.store, rand.New(rand.NewPCG(rng.Uint64(), 1)), 300, 1500)
		}()
		time.Sleep(20 * time.Millisecond)
		down()
		time.Sleep(300 * time.Millisecond) // it fails and backs off meanwhile
		if err := e.pg.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		e.caughtUp(t, postgres.DefaultTable, r)
		pgtest.CheckEqual(t, e.pool, e.store, postgres.DefaultTable)
	}
	stopWatch()
	r.stop(t)
}

// The search test: after a random workload cut by stops, the
// same searches through SQL on the table and through ListProfiles with
// Where, on the directory's indexed fields, find the same profiles.
func TestSearchAgrees(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(31, 32))
	for i := range 8 {
		r := e.project(t, postgres.Options{PageSize: 1 + rng.IntN(200)})
		pgtest.Workload(t, e.store, rng, 400, 400)
		time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
		if i < 7 {
			r.stop(t)
			continue
		}
		e.caughtUp(t, postgres.DefaultTable, r)
		r.stop(t)
	}
	pgtest.CompareSearches(t, e.pool, e.store, postgres.DefaultTable, 37)
}

// A projection whose cursor the feed has trimmed (retention) stops and
// says it must be rebuilt; a rebuild makes it equal to the directory
// again, and the next run resumes without copying.
func TestCursorExpired(t *testing.T) {
	e := newEnvWith(t, &partmap.Retention{Events: 1000})
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(41, 42))
	pgtest.Workload(t, e.store, rng, 300, 500)
	r := e.project(t, postgres.Options{})
	e.caughtUp(t, postgres.DefaultTable, r)
	r.stop(t)
	pgtest.Workload(t, e.store, rng, 300, 2000)
	if _, err := e.store.TrimFeed(ctx); err != nil {
		t.Fatal(err)
	}
	saved := pgtest.SavedCursor(e.pool, postgres.DefaultTable)
	if _, err := e.store.Changes(ctx, partmap.ChangeQuery{After: saved}); partmap.ErrorCode(err) != partmap.ECURSOREXPIRED {
		t.Fatalf("the trim left cursor %s readable (%v): the test tests nothing", saved, err)
	}

	p, err := postgres.New(e.store, e.pool, postgres.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	err = p.Run(ctx)
	if partmap.ErrorCode(err) != partmap.ECURSOREXPIRED || !strings.Contains(partmap.ErrorMessage(err), "must be rebuilt") {
		t.Fatalf("Run: %v, want cursor-expired saying to rebuild", err)
	}
	if got := pgtest.SavedCursor(e.pool, postgres.DefaultTable); got != saved {
		t.Fatalf("the failed run moved the cursor from %s to %s", saved, got)
	}

	r = e.project(t, postgres.Options{Rebuild: true})
	pgtest.Workload(t, e.store, rng, 300, 300)
	e.caughtUp(t, postgres.DefaultTable, r)
	r.stop(t)
	pgtest.CheckEqual(t, e.pool, e.store, postgres.DefaultTable)
	// The rebuild is done: the next run resumes, without copying again.
	rebuilt := pgtest.SavedCursor(e.pool, postgres.DefaultTable)
	var logs storetest.SyncBuffer
	r = e.project(t, postgres.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	pgtest.Workload(t, e.store, rng, 300, 100)
	e.caughtUp(t, postgres.DefaultTable, r)
	r.stop(t)
	pgtest.CheckEqual(t, e.pool, e.store, postgres.DefaultTable)
	if strings.Contains(logs.String(), "copying") || pgtest.SavedCursor(e.pool, postgres.DefaultTable) == rebuilt {
		t.Errorf("after the rebuild the projector did not just resume:\n%s", logs.String())
	}
}

// BenchmarkCatchUp preloads changes into the feed of a projection that
// exists, and times the projector's catching up with them. Run it once:
//
//	go test -run '^$' -bench CatchUp -benchtime 1x ./postgres/
func BenchmarkCatchUp(b *testing.B) {
	const changes = 200_000
	e := newEnv(b)
	ctx := context.Background()
	r := e.project(b, postgres.Options{})
	e.caughtUp(b, postgres.DefaultTable, r) // the empty copy; the cursor is saved
	r.stop(b)
	batch := make([]partmap.Profile, 0, partmap.MaxBulkProfiles)
	for i := range changes {
		batch = append(batch, partmap.Profile{partmap.FieldEmail: pgtest.Email(i), partmap.FieldFullName: "User " + strconv.Itoa(i),
			partmap.FieldCompanyName: pgtest.Companies[i%len(pgtest.Companies)], partmap.FieldCustomerTier: pgtest.Tiers[i%len(pgtest.Tiers)], "visits": strconv.Itoa(i % 97)})
		if len(batch) == cap(batch) || i == changes-1 {
			storetest.MustUpsert(b, e.store, batch)
			batch = batch[:0]
		}
	}
	b.ResetTimer()
	start := time.Now()
	r = e.project(b, postgres.Options{})
	e.caughtUp(b, postgres.DefaultTable, r)
	took := time.Since(start)
	b.StopTimer()
	r.stop(b)
	b.ReportMetric(changes/took.Seconds(), "changes/s")
	var rows int
	e.pool.QueryRow(ctx, `SELECT count(*) FROM `+postgres.DefaultTable).Scan(&rows)
	if rows != changes {
		b.Fatalf("%d rows, want %d", rows, changes)
	}
}

// flakyFeed fails like an unreachable server while down is set.
type flakyFeed struct {
	*pebble.Store
	down atomic.Bool
}

func (f *flakyFeed) Changes(ctx context.Context, q partmap.ChangeQuery) (partmap.ChangePage, error) {
	if f.down.Load() {
		return partmap.ChangePage{}, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
	return f.Store.Changes(ctx, q)
}

// The feed's server unreachable for a while: the projector retries with
// backoff, says so once when it starts and once when it ends, and
// catches up.
func TestFeedOutage(t *testing.T) {
	e := newEnv(t)
	feed := &flakyFeed{Store: e.store}
	var logs storetest.SyncBuffer
	r := e.projectFeed(t, feed, postgres.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), RetryBase: time.Millisecond, RetryMax: 20 * time.Millisecond})
	rng := rand.New(rand.NewPCG(51, 52))
	pgtest.Workload(t, e.store, rng, 200, 200)
	e.caughtUp(t, postgres.DefaultTable, r)
	feed.down.Store(true)
	pgtest.Workload(t, e.store, rng, 200, 500)
	time.Sleep(300 * time.Millisecond) // a dozen failed attempts
	feed.down.Store(false)
	e.caughtUp(t, postgres.DefaultTable, r)
	r.stop(t)
	pgtest.CheckEqual(t, e.pool, e.store, postgres.DefaultTable)
	out := logs.String()
	if n := strings.Count(out, "retrying"); n != 1 {
		t.Errorf("%d lines say it retries, want 1:\n%s", n, out)
	}
	if n := strings.Count(out, "recovered"); n != 1 {
		t.Errorf("%d lines say it recovered, want 1:\n%s", n, out)
	}
}

// A row's updated_at is its profile's last commit in partmap, to the
// millisecond: for a row that a new projection copied as for one that came
// through the change feed, whether the projector reads the store itself
// or, as partmap project does, the HTTP API.
func TestUpdatedAtIsTheLastCommit(t *testing.T) {
	for _, via := range []string{"store", "http"} {
		t.Run(via, func(t *testing.T) {
			e := newEnv(t)
			pgtest.Workload(t, e.store, rand.New(rand.NewPCG(3, 4)), 200, 600) // before the projection: copied
			// The copy starts well after the last commit, so that its own
			// time is never taken for one.
			time.Sleep(20 * time.Millisecond)
			var feed partmap.Feeder = e.store
			if via == "http" {
				srv := httptest.NewServer(pmhttp.NewServer(e.store, nil))
				t.Cleanup(srv.Close)
				c, err := pmhttp.NewClient(srv.URL, nil)
				if err != nil {
					t.Fatal(err)
				}
				feed = c
			}
			r := e.projectFeed(t, feed, postgres.Options{})
			e.caughtUp(t, postgres.DefaultTable, r)
			if n := e.checkUpdatedAt(t); n < 50 {
				t.Fatalf("only %d rows", n)
			}
			pgtest.Workload(t, e.store, rand.New(rand.NewPCG(5, 6)), 200, 300) // through the feed
			e.caughtUp(t, postgres.DefaultTable, r)
			e.checkUpdatedAt(t)
			r.stop(t)
		})
	}
}

// checkUpdatedAt requires every row's updated_at to be its profile's last
// change's time in the feed, and returns how many rows it checked.
func (e *env) checkUpdatedAt(t *testing.T) int {
	t.Helper()
	ctx := context.Background()
	last := map[string]time.Time{}
	for q := (partmap.ChangeQuery{}); ; {
		page, err := e.store.Changes(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Changes) == 0 {
			break
		}
		for _, c := range page.Changes {
			last[c.Email] = c.Time
		}
		q.After = page.Next
	}
	rows, err := e.pool.Query(ctx, `SELECT email, updated_at FROM `+postgres.DefaultTable)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var email string
		var at time.Time
		if err := rows.Scan(&email, &at); err != nil {
			t.Fatal(err)
		}
		if want, ok := last[email]; !ok || !at.Equal(want) {
			t.Errorf("%s: updated_at %s, its last commit %s", email, at.UTC().Format(time.RFC3339Nano), want.UTC().Format(time.RFC3339Nano))
		}
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}
