package postgres_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/postgres"
)

// A new projection copies what the directory holds, then follows a
// random workload: the table ends equal to the directory.
func TestProjectionEqualsDirectory(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(1, 2))
	workload(t, e.store, rng, 300, 1500) // before: copied
	r := e.project(t, postgres.Options{})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			workload(t, e.store, rand.New(rand.NewPCG(uint64(i), 7)), 300, 1500)
		}()
	}
	wg.Wait()
	e.caughtUp(t, postgres.DefaultTable, r)
	e.checkEqual(t, postgres.DefaultTable)
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
	workload(t, e.store, rand.New(rand.NewPCG(3, 4)), 50, 200)
	const odd = `crm.Profiles "x"; DROP TABLE y`
	r1 := e.project(t, postgres.Options{Table: odd})
	r2 := e.project(t, postgres.Options{})
	workload(t, e.store, rand.New(rand.NewPCG(5, 6)), 50, 200)
	e.caughtUp(t, odd, r1)
	e.caughtUp(t, postgres.DefaultTable, r2)
	e.checkEqual(t, `crm."Profiles ""x""; DROP TABLE y"`)
	e.checkEqual(t, postgres.DefaultTable)
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
	if _, _, err := e.store.UpsertProfile(ctx, partmap.Profile{partmap.FieldEmail: "nul@example.com", "note": "a\x00b", "k\x00": "v"}, partmap.Condition{}); err != nil {
		t.Fatal(err)
	}
	r := e.project(t, postgres.Options{})
	if _, _, err := e.store.UpsertProfile(ctx, partmap.Profile{partmap.FieldEmail: "nul2@example.com", "note": "\x00"}, partmap.Condition{}); err != nil {
		t.Fatal(err)
	}
	e.caughtUp(t, postgres.DefaultTable, r)
	r.stop(t)
	got := e.table(t, postgres.DefaultTable)
	if g := got["nul@example.com"].profile; g["note"] != "a\uFFFDb" || g["k\uFFFD"] != "v" {
		t.Errorf("copied: %q", g)
	}
	if g := got["nul2@example.com"].profile; g["note"] != "\uFFFD" {
		t.Errorf("followed: %q", g)
	}
}

// Stopping the projector at random points, during the copy and while it
// follows, never moves the cursor back, and the table ends equal to the
// directory.
func TestExactlyOnceAcrossCancels(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(11, 12))
	workload(t, e.store, rng, 2000, 6000)
	stopWatch := e.cursorWatch(t, postgres.DefaultTable)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		wrng := rand.New(rand.NewPCG(13, 14))
		for ctx.Err() == nil {
			workload(t, e.store, wrng, 500, 50)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() }) // before the store closes
	for i := range 25 {
		r := e.project(t, postgres.Options{PageSize: 1 + rng.IntN(50), Rebuild: i == 12})
		time.Sleep(time.Duration(rng.IntN(60)) * time.Millisecond)
		r.stop(t)
	}
	cancel()
	wg.Wait()
	r := e.project(t, postgres.Options{})
	e.caughtUp(t, postgres.DefaultTable, r)
	r.stop(t)
	stopWatch()
	e.checkEqual(t, postgres.DefaultTable)
}

// A PostgreSQL restart, and a crash, meet a projector that reconnects on
// its own and catches up.
func TestPostgresRestart(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(21, 22))
	r := e.project(t, postgres.Options{PageSize: 100})
	stopWatch := e.cursorWatch(t, postgres.DefaultTable)
	workload(t, e.store, rng, 300, 500)
	e.caughtUp(t, postgres.DefaultTable, r)
	for _, down := range []func(){e.pg.Stop, e.pg.Crash} {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			workload(t, e.store, rand.New(rand.NewPCG(rng.Uint64(), 1)), 300, 1500)
		}()
		time.Sleep(20 * time.Millisecond)
		down()
		time.Sleep(300 * time.Millisecond) // it fails and backs off meanwhile
		if err := e.pg.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		e.caughtUp(t, postgres.DefaultTable, r)
		e.checkEqual(t, postgres.DefaultTable)
	}
	stopWatch()
	r.stop(t)
}
