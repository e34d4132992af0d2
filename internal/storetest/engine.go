package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

// EngineOpener returns an engine over a new, empty backend whose writers wait
// lockWait for a held lock (0: fail at once).
type EngineOpener func(t *testing.T, lockWait time.Duration) *engine.Engine

// RunEngine runs the engine conformance suite: the load/lock/commit rules of
// the invocation model, on a real backend.
func RunEngine(t *testing.T, open EngineOpener) {
	ctx := context.Background()
	const p, q = partmap.Partition(7), partmap.Partition(8)
	rec := func(name string) partmap.Record {
		return partmap.Record{Profile: partmap.Profile{"fullName": name}, Version: 1}
	}
	lockOne := func(p partmap.Partition) engine.Invocation {
		return engine.Invocation{Load: []partmap.Partition{p}, Lock: []partmap.Partition{p}}
	}
	get := func(t *testing.T, e *engine.Engine, p partmap.Partition, email string) (partmap.Record, bool) {
		t.Helper()
		var got partmap.Record
		var ok bool
		err := e.Invoke(ctx, engine.Invocation{Load: []partmap.Partition{p}}, func(tx *engine.Tx) (err error) {
			got, ok, err = tx.Get(p, email)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return got, ok
	}
	// hold locks p in the background until the returned release is called.
	hold := func(t *testing.T, e *engine.Engine, p partmap.Partition) (release func()) {
		t.Helper()
		locked, unlock, done := make(chan struct{}), make(chan struct{}), make(chan error)
		go func() {
			done <- e.Invoke(ctx, lockOne(p), func(tx *engine.Tx) error {
				close(locked)
				<-unlock
				return nil
			})
		}()
		select {
		case <-locked:
		case err := <-done:
			t.Fatalf("could not take the lock: %v", err)
		}
		return func() {
			close(unlock)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
	}

	t.Run("ErrReadNotLoaded", func(t *testing.T) {
		e := open(t, 0)
		err := e.Invoke(ctx, engine.Invocation{Load: []partmap.Partition{p}}, func(tx *engine.Tx) error {
			_, _, err := tx.Get(q, "a@example.com")
			return err
		})
		if !errors.Is(err, engine.ErrNotLoaded) {
			t.Fatalf("got %v, want ErrNotLoaded", err)
		}
	})

	t.Run("ErrWriteNotLocked", func(t *testing.T) {
		e := open(t, 0)
		// Loading is not locking: a read-only invocation cannot write.
		err := e.Invoke(ctx, engine.Invocation{Load: []partmap.Partition{p}}, func(tx *engine.Tx) error {
			return tx.Put(p, "a@example.com", rec("x"))
		})
		if !errors.Is(err, engine.ErrNotLocked) {
			t.Fatalf("got %v, want ErrNotLocked", err)
		}
		if _, ok := get(t, e, p, "a@example.com"); ok {
			t.Fatal("an unlocked write was stored")
		}
	})

	t.Run("ErrSwallowedRefusalStillAborts", func(t *testing.T) {
		e := open(t, 0)
		err := e.Invoke(ctx, lockOne(p), func(tx *engine.Tx) error {
			if err := tx.Put(p, "a@example.com", rec("x")); err != nil {
				return err
			}
			tx.Put(q, "b@example.com", rec("y")) // refused; the error is ignored
			return nil
		})
		if !errors.Is(err, engine.ErrNotLocked) {
			t.Fatalf("got %v, want ErrNotLocked", err)
		}
		if _, ok := get(t, e, p, "a@example.com"); ok {
			t.Fatal("an invocation with a refused access committed")
		}
	})

	t.Run("HandlerErrorWritesNothing", func(t *testing.T) {
		e := open(t, 0)
		boom := errors.New("boom")
		err := e.Invoke(ctx, lockOne(p), func(tx *engine.Tx) error {
			tx.Put(p, "a@example.com", rec("x"))
			tx.Put(p, "b@example.com", rec("y"))
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("got %v, want the handler's error", err)
		}
		for _, email := range []string{"a@example.com", "b@example.com"} {
			if _, ok := get(t, e, p, email); ok {
				t.Fatalf("%s was written by a failed invocation", email)
			}
		}
	})

	t.Run("CommitIsAtomicAndReadsOwnWrites", func(t *testing.T) {
		e := open(t, 0)
		err := e.Invoke(ctx, lockOne(p), func(tx *engine.Tx) error {
			tx.Put(p, "a@example.com", rec("x"))
			got, ok, err := tx.Get(p, "a@example.com")
			if err != nil || !ok || got.Profile["fullName"] != "x" {
				t.Errorf("staged write not visible to its own invocation: %v %v %v", got, ok, err)
			}
			return tx.Put(p, "b@example.com", rec("y"))
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, email := range []string{"a@example.com", "b@example.com"} {
			if _, ok := get(t, e, p, email); !ok {
				t.Fatalf("%s missing after commit", email)
			}
		}
		err = e.Invoke(ctx, lockOne(p), func(tx *engine.Tx) error {
			return tx.Delete(p, "a@example.com")
		})
		if _, ok := get(t, e, p, "a@example.com"); err != nil || ok {
			t.Fatalf("delete: err=%v, still there=%v", err, ok)
		}
	})

	t.Run("ErrLockConflictFailsFast", func(t *testing.T) {
		e := open(t, 0)
		release := hold(t, e, p)
		defer release()
		ran := false
		err := e.Invoke(ctx, lockOne(p), func(*engine.Tx) error { ran = true; return nil })
		if !errors.Is(err, partmap.ErrLockConflict) || ran {
			t.Fatalf("got %v (handler ran: %v), want a lock conflict", err, ran)
		}
		// Reads take no lock.
		if _, ok := get(t, e, p, "a@example.com"); ok {
			t.Fatal("unexpected record")
		}
	})

	t.Run("LockWaitBudget", func(t *testing.T) {
		const budget = 30 * time.Millisecond
		e := open(t, budget)
		release := hold(t, e, p)
		start := time.Now()
		err := e.Invoke(ctx, lockOne(p), func(*engine.Tx) error { return nil })
		if !errors.Is(err, partmap.ErrLockConflict) {
			t.Fatalf("got %v, want a lock conflict after the budget", err)
		}
		if waited := time.Since(start); waited < budget {
			t.Fatalf("gave up after %v, before the %v budget", waited, budget)
		}
		// A waiter that gets the lock within its budget succeeds.
		e2 := open(t, time.Minute)
		release2 := hold(t, e2, p)
		done := make(chan error)
		go func() {
			done <- e2.Invoke(ctx, lockOne(p), func(tx *engine.Tx) error { return tx.Put(p, "w@example.com", rec("w")) })
		}()
		time.Sleep(10 * time.Millisecond) // most likely queued by now; correct either way
		release2()
		if err := <-done; err != nil {
			t.Fatalf("waiter: %v", err)
		}
		release()
	})

	t.Run("DifferentPartitionsDoNotBlock", func(t *testing.T) {
		e := open(t, 0) // fail fast: any shared lock would show as a conflict
		release := hold(t, e, p)
		defer release()
		err := e.Invoke(ctx, lockOne(q), func(tx *engine.Tx) error { return tx.Put(q, "b@example.com", rec("y")) })
		if err != nil {
			t.Fatalf("write to %s while %s is held: %v", q, p, err)
		}
		if _, ok := get(t, e, q, "b@example.com"); !ok {
			t.Fatal("write to the free partition is not visible")
		}
	})

	t.Run("WholeMapLock", func(t *testing.T) {
		e := open(t, 0)
		// A held partition keeps the whole-map lock out...
		release := hold(t, e, p)
		if err := e.InvokeExclusive(ctx, func(*engine.Tx) error { return nil }); !errors.Is(err, partmap.ErrLockConflict) {
			t.Fatalf("whole-map lock while %s is held: got %v", p, err)
		}
		release()
		// ...and the whole-map lock keeps every writer out.
		locked, unlock, done := make(chan struct{}), make(chan struct{}), make(chan error)
		go func() {
			done <- e.InvokeExclusive(ctx, func(tx *engine.Tx) error {
				close(locked)
				<-unlock
				return tx.Put(q, "m@example.com", rec("m"))
			})
		}()
		<-locked
		for part := range partmap.Partition(e.Partitions()) {
			if err := e.Invoke(ctx, lockOne(part), func(*engine.Tx) error { return nil }); !errors.Is(err, partmap.ErrLockConflict) {
				t.Fatalf("write to %s under the whole-map lock: got %v", part, err)
			}
		}
		close(unlock)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if _, ok := get(t, e, q, "m@example.com"); !ok {
			t.Fatal("whole-map invocation's write is missing")
		}
		if err := e.Invoke(ctx, lockOne(p), func(*engine.Tx) error { return nil }); err != nil {
			t.Fatalf("write after the whole-map lock: %v", err)
		}
	})

	// Prefetch reads what Get would, in bulk: a backend's GetBatch must
	// answer for the partition asked (not for the same email in another),
	// find the last partition's records, and cope with emails out of order
	// and repeated.
	t.Run("PrefetchReadsWhatGetReads", func(t *testing.T) {
		e := open(t, 0)
		last := partmap.Partition(e.Partitions() - 1)
		put := func(p partmap.Partition, email, name string) {
			t.Helper()
			if err := e.Invoke(ctx, lockOne(p), func(tx *engine.Tx) error { return tx.Put(p, email, rec(name)) }); err != nil {
				t.Fatal(err)
			}
		}
		put(p, "b@example.com", "B")
		put(p, "a@example.com", "A")
		put(q, "c@example.com", "C in q")
		put(last, "z@example.com", "Z")
		check := func(pp partmap.Partition, want map[string]string) {
			t.Helper()
			var emails []string
			for e := range want {
				emails = append(emails, e, e)
			}
			err := e.Invoke(ctx, lockOne(pp), func(tx *engine.Tx) error {
				if err := tx.Prefetch(pp, emails); err != nil {
					return err
				}
				for email, name := range want {
					got, ok, err := tx.Get(pp, email)
					if err != nil {
						return err
					}
					if ok != (name != "") || got.Profile["fullName"] != name {
						t.Errorf("%s %s after Prefetch: %v %v; want %q", pp, email, got.Profile, ok, name)
					}
				}
				// A prefetched absent record is created, not replaced.
				return tx.Put(pp, "new@example.com", rec("N"))
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		check(p, map[string]string{"b@example.com": "B", "zz@example.com": "", "a@example.com": "A", "c@example.com": ""})
		check(last, map[string]string{"z@example.com": "Z", "a@example.com": ""})
		if got, ok := get(t, e, p, "new@example.com"); !ok || got.Profile["fullName"] != "N" {
			t.Fatalf("write after Prefetch: %v %v", got, ok)
		}
		err := e.Invoke(ctx, engine.Invocation{Load: []partmap.Partition{p}}, func(tx *engine.Tx) error {
			return tx.Prefetch(q, []string{"c@example.com"})
		})
		if !errors.Is(err, engine.ErrNotLoaded) {
			t.Fatalf("Prefetch of a partition not loaded: %v, want ErrNotLoaded", err)
		}
	})

	t.Run("ErrPartitionOutOfRange", func(t *testing.T) {
		e := open(t, 0)
		bad := partmap.Partition(e.Partitions())
		if err := e.Invoke(ctx, lockOne(bad), func(*engine.Tx) error { return nil }); err == nil {
			t.Fatalf("invocation on %s of %d partitions succeeded", bad, e.Partitions())
		}
	})
}
