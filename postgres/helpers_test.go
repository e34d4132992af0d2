package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/pgtest"
	"github.com/partmap/partmap/pebble"
	"github.com/partmap/partmap/postgres"
)

// env is a started Pebble directory and a PostgreSQL server.
type env struct {
	store *pebble.Store
	pg    *pgtest.Server
	pool  *pgxpool.Pool
}

func newEnv(t testing.TB) *env { return newEnvWith(t, nil) }

// newEnvWith opens the store with this feed retention (nil: the default).
func newEnvWith(t testing.TB, retention *partmap.Retention) *env {
	t.Helper()
	ctx := context.Background()
	s, err := pebble.Open(t.TempDir(), &pebble.Options{DirectoryOptions: partmap.DirectoryOptions{Partitions: 64, LockWait: time.Second, FeedRetention: retention}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	pg := pgtest.Start(t)
	pool, err := pgxpool.New(ctx, pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &env{store: s, pg: pg, pool: pool}
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// running is a projector running in the background.
type running struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned err
	err    error
}

func (e *env) project(t testing.TB, opts postgres.Options) *running {
	return e.projectFeed(t, e.store, opts)
}

func (e *env) projectFeed(t testing.TB, feed partmap.Feeder, opts postgres.Options) *running {
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	if opts.Wait == 0 {
		opts.Wait = 200 * time.Millisecond
	}
	if opts.RetryMax == 0 {
		opts.RetryMax = 300 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan struct{})}
	go func() {
		r.err = postgres.Project(ctx, feed, e.pool, opts)
		close(r.done)
	}()
	// Before the store closes, when a test fails.
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// stopped reports whether Run returned, and what.
func (r *running) stopped() (bool, error) {
	select {
	case <-r.done:
		return true, r.err
	default:
		return false, nil
	}
}

// stop cancels the projector and requires Run to return nil.
func (r *running) stop(t testing.TB) {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
		if r.err != nil {
			t.Fatalf("Run: %v", r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// savedCursor reads table's committed cursor ("" when none).
func (e *env) savedCursor(t testing.TB, table string) string {
	t.Helper()
	var c *string
	err := e.pool.QueryRow(context.Background(), `SELECT cursor FROM partmap_projection WHERE name = $1`, table).Scan(&c)
	if err != nil || c == nil {
		return ""
	}
	return *c
}

// caughtUp waits until table's cursor has no change after it.
func (e *env) caughtUp(t testing.TB, table string, r *running) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if done, err := r.stopped(); done {
			t.Fatalf("the projector stopped: %v", err)
		}
		if c := e.savedCursor(t, table); c != "" {
			page, err := e.store.Changes(context.Background(), partmap.ChangeQuery{After: c, Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Changes) == 0 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("table %s did not catch up with the feed", table)
}

type row struct {
	profile partmap.Profile
	etag    string
}

// listDirectory reads every profile with its ETag.
func listDirectory(t testing.TB, s partmap.Store) map[string]row {
	t.Helper()
	out := map[string]row{}
	opts := partmap.ListOptions{Limit: partmap.MaxPageLimit}
	for {
		page, err := s.ListProfiles(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Profiles {
			out[r.Profile.Email()] = row{r.Profile, r.Version.ETag()}
		}
		if page.NextCursor == "" {
			return out
		}
		opts.Cursor = page.NextCursor
	}
}

// table reads every row of a projected table.
func (e *env) table(t testing.TB, name string) map[string]row {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT email, profile::text, etag FROM `+name)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]row{}
	for rows.Next() {
		var email, js, etag string
		if err := rows.Scan(&email, &js, &etag); err != nil {
			t.Fatal(err)
		}
		var p partmap.Profile
		if err := json.Unmarshal([]byte(js), &p); err != nil {
			t.Fatalf("%s: %v", email, err)
		}
		out[email] = row{p, etag}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkEqual requires the table to hold exactly the directory.
func (e *env) checkEqual(t testing.TB, name string) {
	t.Helper()
	got, want := e.table(t, name), listDirectory(t, e.store)
	bad := 0
	for email, w := range want {
		g, ok := got[email]
		switch {
		case !ok:
			t.Errorf("%s: missing from the table", email)
		case g.etag != w.etag || !maps.Equal(g.profile, w.profile):
			t.Errorf("%s: table has %s %v, directory %s %v", email, g.etag, g.profile, w.etag, w.profile)
		default:
			continue
		}
		if bad++; bad > 10 {
			t.FailNow()
		}
	}
	for email := range got {
		if _, ok := want[email]; !ok {
			t.Errorf("%s: in the table, not in the directory", email)
			if bad++; bad > 10 {
				t.FailNow()
			}
		}
	}
	if len(want) == 0 {
		t.Fatal("the directory is empty: the test tests nothing")
	}
}

var (
	companies = []string{"Acme", "Globex", "Initech", "Umbrella", "Stark & Sons", "Ünïcode \"Ltd\""}
	tiers     = []string{"gold", "silver", "bronze"}
)

func email(i int) string { return fmt.Sprintf("user%d@example.com", i) }

// workload runs n random writes on emails user0 to user(emails-1):
// upserts, patches, increments, deletes and renames. Misses and lock
// conflicts are part of the game.
func workload(t testing.TB, s partmap.Store, rng *rand.Rand, emails, n int) {
	t.Helper()
	ctx := context.Background()
	for range n {
		a, b := email(rng.IntN(emails)), email(rng.IntN(emails))
		var err error
		switch k := rng.IntN(100); {
		case k < 40:
			p := partmap.Profile{partmap.FieldEmail: a, partmap.FieldCompanyName: companies[rng.IntN(len(companies))],
				partmap.FieldCustomerTier: tiers[rng.IntN(len(tiers))]}
			if rng.IntN(2) == 0 {
				p[partmap.FieldFullName] = "User " + strconv.Itoa(rng.IntN(1000))
			}
			_, _, err = partmap.UpsertProfile(ctx, s, p, partmap.Condition{})
		case k < 60:
			tier := tiers[rng.IntN(len(tiers))]
			patch := partmap.Patch{partmap.FieldCustomerTier: &tier}
			if rng.IntN(3) == 0 {
				patch[partmap.FieldCompanyName] = nil
			}
			_, err = partmap.PatchProfile(ctx, s, a, patch, partmap.Condition{})
		case k < 75:
			_, err = partmap.IncrementField(ctx, s, a, "visits", int64(rng.IntN(5)+1), partmap.Condition{})
		case k < 87:
			err = partmap.DeleteProfile(ctx, s, a, partmap.Condition{})
		default:
			_, err = partmap.RenameProfile(ctx, s, a, b, partmap.Condition{})
		}
		switch partmap.ErrorCode(err) {
		case "", partmap.ENOTFOUND, partmap.EEXISTS, partmap.EINVALID, partmap.ELOCKCONFLICT:
		default:
			t.Errorf("workload: %v", err)
			return
		}
	}
}

// cursorWatch reads a table's cursor every few milliseconds and fails the
// test if it ever goes back. Stop it to end it.
func (e *env) cursorWatch(t testing.TB, table string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var last uint64
		for ctx.Err() == nil {
			var c *string
			err := e.pool.QueryRow(ctx, `SELECT cursor FROM partmap_projection WHERE name = $1`, table).Scan(&c)
			if err == nil && c != nil {
				n, err := strconv.ParseUint(*c, 10, 64)
				if err != nil {
					t.Errorf("cursor %q is not Pebble's", *c)
					return
				}
				if n < last {
					t.Errorf("the cursor went back from %d to %d", last, n)
					return
				}
				last = n
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	return func() { cancel(); wg.Wait() }
}
