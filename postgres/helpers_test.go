package postgres_test

import (
	"context"
	"io"
	"log/slog"
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

// caughtUp waits until table's cursor has no change after it.
func (e *env) caughtUp(t testing.TB, table string, r *running) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if done, err := r.stopped(); done {
			t.Fatalf("the projector stopped: %v", err)
		}
		if pgtest.CaughtUp(t, e.pool, e.store, table) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("table %s did not catch up with the feed", table)
}
