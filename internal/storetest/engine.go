package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

// EngineOpener returns the engine of a new, empty directory of
// partmap.DefaultPartitions partitions in generation 0, with the default
// indexes, whose writers wait lockWait for a held lock (negative: fail at
// once), as partmap.DirectoryOptions.LockWait says it.
type EngineOpener func(t *testing.T, lockWait time.Duration) *engine.Engine

// RunEngine runs the engine conformance suite: the load/lock/commit rules of
// the invocation model, on a real backend.
func RunEngine(t *testing.T, open EngineOpener) {
	ctx := context.Background()
	p, q := engine.Part{Partition: 7}, engine.Part{Partition: 8}
	rec := func(name string) partmap.Record {
		return partmap.Record{Profile: partmap.Profile{"fullName": name}, Version: 1}
	}
	lockOne := func(p engine.Part) engine.Invocation {
		return engine.Invocation{Load: []engine.Part{p}, Lock: []engine.Part{p}}
	}
	get := func(t *testing.T, e *engine.Engine, p engine.Part, email string) (partmap.Record, bool) {
		t.Helper()
		var got partmap.Record
		var ok bool
		err := e.Invoke(ctx, engine.Invocation{Load: []engine.Part{p}}, func(tx *engine.Tx) (err error) {
			got, ok, err = tx.Get(p, email)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return got, ok
	}
	// notStored fails if p holds email, which what says should not have written.
	notStored := func(t *testing.T, e *engine.Engine, p engine.Part, email, what string) {
		t.Helper()
		if _, ok := get(t, e, p, email); ok {
			t.Fatalf("%s was stored by %s", email, what)
		}
	}
	// hold locks p in the background until the returned release is called.
	hold := func(t *testing.T, e *engine.Engine, p engine.Part) (release func()) {
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
		e := open(t, -1)
		err := e.Invoke(ctx, engine.Invocation{Load: []engine.Part{p}}, func(tx *engine.Tx) error {
			_, _, err := tx.Get(q, "a@example.com")
			return err
		})
		if !errors.Is(err, engine.ErrNotLoaded) {
			t.Fatalf("got %v, want ErrNotLoaded", err)
		}
	})

	t.Run("ErrWriteNotLocked", func(t *testing.T) {
		e := open(t, -1)
		// Loading is not locking: a read-only invocation cannot write.
		err := e.Invoke(ctx, engine.Invocation{Load: []engine.Part{p}}, func(tx *engine.Tx) error {
			return tx.Put(p, "a@example.com", rec("x"), partmap.OpPut)
		})
		if !errors.Is(err, engine.ErrNotLocked) {
			t.Fatalf("got %v, want ErrNotLocked", err)
		}
		notStored(t, e, p, "a@example.com", "an unlocked write")
	})

	t.Run("ErrSwallowedRefusalStillAborts", func(t *testing.T) {
		e := open(t, -1)
		err := e.Invoke(ctx, lockOne(p), func(tx *engine.Tx) error {
			if err := tx.Put(p, "a@example.com", rec("x"), partmap.OpPut); err != nil {
				return err
			}
			tx.Put(q, "b@example.com", rec("y"), partmap.OpPut) // refused; the error is ignored
			return nil
		})
		if !errors.Is(err, engine.ErrNotLocked) {
			t.Fatalf("got %v, want ErrNotLocked", err)
		}
		notStored(t, e, p, "a@example.com", "an invocation with a refused access")
	})

	t.Run("HandlerErrorWritesNothing", func(t *testing.T) {
		e := open(t, -1)
		boom := errors.New("boom")
		err := e.Invoke(ctx, lockOne(p), func(tx *engine.Tx) error {
			tx.Put(p, "a@example.com", rec("x"), partmap.OpPut)
			tx.Put(p, "b@example.com", rec("y"), partmap.OpPut)
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("got %v, want the handler's error", err)
		}
		for _, email := range []string{"a@example.com", "b@example.com"} {
			notStored(t, e, p, email, "a failed invocation")
		}
	})

	t.Run("CommitIsAtomicAndReadsOwnWrites", func(t *testing.T) {
		e := open(t, -1)
		err := e.Invoke(ctx, lockOne(p), func(tx *engine.Tx) error {
			tx.Put(p, "a@example.com", rec("x"), partmap.OpPut)
			got, ok, err := tx.Get(p, "a@example.com")
			if err != nil || !ok || got.Profile["fullName"] != "x" {
				t.Errorf("staged write not visible to its own invocation: %v %v %v", got, ok, err)
			}
			return tx.Put(p, "b@example.com", rec("y"), partmap.OpPut)
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
			return tx.Delete(p, "a@example.com", partmap.OpDelete)
		})
		if _, ok := get(t, e, p, "a@example.com"); err != nil || ok {
			t.Fatalf("delete: err=%v, still there=%v", err, ok)
		}
	})

	t.Run("ErrLockConflictFailsFast", func(t *testing.T) {
		e := open(t, -1)
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

	// A write under partmap.NoLockWait does not wait, whatever the
	// engine's budget: the event loop of the Redis protocol's door tries
	// it again later instead of holding every client.
	t.Run("NoLockWaitFailsFast", func(t *testing.T) {
		e := open(t, time.Hour)
		release := hold(t, e, p)
		defer release()
		done := make(chan error, 1)
		go func() {
			done <- e.Invoke(partmap.NoLockWait(ctx), lockOne(p), func(*engine.Tx) error { return nil })
		}()
		select {
		case err := <-done:
			if !errors.Is(err, partmap.ErrLockConflict) {
				t.Fatalf("got %v, want a lock conflict", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("a write under NoLockWait waited for the lock")
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
			done <- e2.Invoke(ctx, lockOne(p), func(tx *engine.Tx) error { return tx.Put(p, "w@example.com", rec("w"), partmap.OpPut) })
		}()
		time.Sleep(10 * time.Millisecond) // most likely queued by now; correct either way
		release2()
		if err := <-done; err != nil {
			t.Fatalf("waiter: %v", err)
		}
		release()
	})

	t.Run("DifferentPartitionsDoNotBlock", func(t *testing.T) {
		e := open(t, -1) // fail fast: any shared lock would show as a conflict
		release := hold(t, e, p)
		defer release()
		err := e.Invoke(ctx, lockOne(q), func(tx *engine.Tx) error { return tx.Put(q, "b@example.com", rec("y"), partmap.OpPut) })
		if err != nil {
			t.Fatalf("write to %s while %s is held: %v", q.Partition, p.Partition, err)
		}
		if _, ok := get(t, e, q, "b@example.com"); !ok {
			t.Fatal("write to the free partition is not visible")
		}
	})

	// An invocation that declares its records touches those alone, and
	// reads no partition whole; its writes commit as any other's.
	t.Run("ErrUndeclaredRecord", func(t *testing.T) {
		e := open(t, -1)
		inv := lockOne(p)
		inv.Records = []string{"a@example.com"}
		touch := map[string]func(tx *engine.Tx) error{
			"Get":      func(tx *engine.Tx) error { _, _, err := tx.Get(p, "b@example.com"); return err },
			"Prefetch": func(tx *engine.Tx) error { return tx.Prefetch(p, []string{"a@example.com", "b@example.com"}) },
			"Put":      func(tx *engine.Tx) error { return tx.Put(p, "b@example.com", rec("b"), partmap.OpPut) },
			"Delete":   func(tx *engine.Tx) error { return tx.Delete(p, "b@example.com", partmap.OpDelete) },
			"Scan":     func(tx *engine.Tx) error { _, err := tx.Scan(p); return err },
			"Count":    func(tx *engine.Tx) error { _, err := tx.Count(p); return err },
		}
		for name, fn := range touch {
			err := e.Invoke(ctx, inv, func(tx *engine.Tx) error {
				tx.Put(p, "a@example.com", rec("a"), partmap.OpPut)
				fn(tx) // refused; the error is ignored
				return nil
			})
			if !errors.Is(err, engine.ErrUndeclared) {
				t.Errorf("%s of an undeclared record: %v, want ErrUndeclared", name, err)
			}
		}
		notStored(t, e, p, "a@example.com", "an invocation with a refused access")
		for _, name := range []string{"x", "y"} {
			if err := e.Invoke(ctx, inv, func(tx *engine.Tx) error { return tx.Put(p, "a@example.com", rec(name), partmap.OpPut) }); err != nil {
				t.Fatal(err)
			}
		}
		if got, ok := get(t, e, p, "a@example.com"); !ok || got.Profile["fullName"] != "y" {
			t.Fatalf("after two declared writes: %v %v", got.Profile, ok)
		}
	})

	t.Run("WholeMapLock", func(t *testing.T) {
		e := open(t, -1)
		var all []engine.Part
		for part := range partmap.Partition(partmap.DefaultPartitions) {
			all = append(all, engine.Part{Partition: part})
		}
		// A held partition keeps the whole-map lock out...
		release := hold(t, e, p)
		if _, err := e.Hold(ctx, all, 0); !errors.Is(err, partmap.ErrLockConflict) {
			t.Fatalf("whole-map lock while %s is held: got %v", p.Partition, err)
		}
		release()
		// ...and the whole-map lock keeps every writer out.
		lease, err := e.Hold(ctx, all, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, part := range all {
			if err := e.Invoke(ctx, lockOne(part), func(*engine.Tx) error { return nil }); !errors.Is(err, partmap.ErrLockConflict) {
				t.Fatalf("write to %s under the whole-map lock: got %v", part.Partition, err)
			}
		}
		// Its holder writes under it, a part at a time, with InvokeHeld.
		for i, part := range []engine.Part{p, q} {
			err := e.InvokeHeld(ctx, lease, lockOne(part), func(tx *engine.Tx) error {
				return tx.Put(part, "held@example.com", rec(fmt.Sprint("held", i)), partmap.OpPut)
			})
			if err != nil {
				t.Fatalf("write to %s under the held lease: %v", part.Partition, err)
			}
		}
		if err := lease.Release(); err != nil {
			t.Fatal(err)
		}
		one, err := e.Hold(ctx, []engine.Part{p}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.InvokeHeld(ctx, one, lockOne(q), func(*engine.Tx) error { return nil }); !errors.Is(err, engine.ErrNotLocked) {
			t.Fatalf("a write under a lease that does not hold its partition: %v, want ErrNotLocked", err)
		}
		one.Release()
		for i, part := range []engine.Part{p, q} {
			if got, ok := get(t, e, part, "held@example.com"); !ok || got.Profile["fullName"] != fmt.Sprint("held", i) {
				t.Fatalf("in %s, the write under the held lease: %v %v", part.Partition, got.Profile, ok)
			}
		}
		if err := e.Invoke(ctx, lockOne(p), func(*engine.Tx) error { return nil }); err != nil {
			t.Fatalf("write after the whole-map lock: %v", err)
		}
		// Only under a lease of Hold.
		if err := e.InvokeHeld(ctx, nil, lockOne(p), func(*engine.Tx) error { return nil }); err == nil {
			t.Fatal("InvokeHeld without a lease of Hold ran")
		}
	})

	// An invocation's writes reach the backend finished: the partition's
	// count follows its profiles (and goes with the last one), and the index
	// entries follow the indexed fields' values.
	t.Run("CountsAndIndexEntriesFollowWrites", func(t *testing.T) {
		e := open(t, -1)
		write := func(fn func(tx *engine.Tx) error) {
			t.Helper()
			if err := e.Invoke(ctx, lockOne(p), fn); err != nil {
				t.Fatal(err)
			}
		}
		check := func(wantCount int64, wantEntries ...engine.IndexEntry) {
			t.Helper()
			err := e.Invoke(ctx, engine.Invocation{Load: []engine.Part{p}}, func(tx *engine.Tx) error {
				n, err := tx.Count(p)
				if err != nil {
					return err
				}
				entries, err := tx.IndexEntries(p)
				if err != nil {
					return err
				}
				slices.SortFunc(entries, func(a, b engine.IndexEntry) int { return strings.Compare(a.Email+a.Value, b.Email+b.Value) })
				if n != wantCount || !slices.Equal(entries, wantEntries) {
					t.Errorf("count %d, entries %v; want %d, %v", n, entries, wantCount, wantEntries)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		acme := func(tier string) partmap.Record {
			return partmap.Record{Profile: partmap.Profile{"companyName": "Acme", "customerTier": tier}, Version: 1}
		}
		write(func(tx *engine.Tx) error {
			tx.Put(p, "a@example.com", acme("gold"), partmap.OpPut)
			tx.Put(p, "b@example.com", rec("b"), partmap.OpPut)
			return tx.Put(p, "a@example.com", acme("gold"), partmap.OpPut) // twice in one invocation counts once
		})
		check(2, engine.IndexEntry{Field: 0, Value: "Acme", Email: "a@example.com"}, engine.IndexEntry{Field: 1, Value: "gold", Email: "a@example.com"})
		write(func(tx *engine.Tx) error { return tx.Put(p, "a@example.com", acme("silver"), partmap.OpPut) }) // replaces one entry
		check(2, engine.IndexEntry{Field: 0, Value: "Acme", Email: "a@example.com"}, engine.IndexEntry{Field: 1, Value: "silver", Email: "a@example.com"})
		write(func(tx *engine.Tx) error { return tx.Delete(p, "nobody@example.com", partmap.OpDelete) })
		write(func(tx *engine.Tx) error {
			tx.Put(p, "c@example.com", acme("gold"), partmap.OpPut)
			return tx.Delete(p, "c@example.com", partmap.OpDelete) // created and deleted in one invocation
		})
		check(2, engine.IndexEntry{Field: 0, Value: "Acme", Email: "a@example.com"}, engine.IndexEntry{Field: 1, Value: "silver", Email: "a@example.com"})
		write(func(tx *engine.Tx) error {
			tx.Delete(p, "a@example.com", partmap.OpDelete)
			return tx.Delete(p, "b@example.com", partmap.OpDelete)
		})
		check(0)
	})

	// The whole-partition reads are held to the invocation's loads too, and
	// refuse a partition the invocation has written, whose writes they
	// would not show.
	t.Run("ErrWholePartitionReads", func(t *testing.T) {
		e := open(t, -1)
		if err := e.Invoke(ctx, lockOne(p), func(tx *engine.Tx) error { return tx.Put(p, "a@example.com", rec("a"), partmap.OpPut) }); err != nil {
			t.Fatal(err)
		}
		reads := map[string]func(tx *engine.Tx, part engine.Part) error{
			"Scan":         func(tx *engine.Tx, part engine.Part) error { _, err := tx.Scan(part); return err },
			"Count":        func(tx *engine.Tx, part engine.Part) error { _, err := tx.Count(part); return err },
			"IndexEntries": func(tx *engine.Tx, part engine.Part) error { _, err := tx.IndexEntries(part); return err },
		}
		for name, read := range reads {
			err := e.Invoke(ctx, engine.Invocation{Load: []engine.Part{q}}, func(tx *engine.Tx) error { return read(tx, p) })
			if !errors.Is(err, engine.ErrNotLoaded) {
				t.Errorf("%s of a partition not loaded: %v, want ErrNotLoaded", name, err)
			}
			err = e.Invoke(ctx, lockOne(p), func(tx *engine.Tx) error {
				tx.Put(p, "b@example.com", rec("b"), partmap.OpPut)
				return read(tx, p)
			})
			if !errors.Is(err, engine.ErrWritten) {
				t.Errorf("%s of a partition written: %v, want ErrWritten", name, err)
			}
		}
		var items []engine.Item
		err := e.Invoke(ctx, engine.Invocation{Load: []engine.Part{p}}, func(tx *engine.Tx) (err error) {
			items, err = tx.Scan(p)
			return err
		})
		if err != nil || len(items) != 1 || items[0].Email != "a@example.com" || items[0].Partition != p.Partition {
			t.Fatalf("Scan: %v %v", items, err)
		}
	})

	// Prefetch reads what Get would, in bulk: a backend's Get of many emails must
	// answer for the partition asked (not for the same email in another),
	// find the last partition's records, and cope with emails out of order
	// and repeated.
	t.Run("PrefetchReadsWhatGetReads", func(t *testing.T) {
		e := open(t, -1)
		last := engine.Part{Partition: partmap.DefaultPartitions - 1}
		put := func(p engine.Part, email, name string) {
			t.Helper()
			if err := e.Invoke(ctx, lockOne(p), func(tx *engine.Tx) error { return tx.Put(p, email, rec(name), partmap.OpPut) }); err != nil {
				t.Fatal(err)
			}
		}
		put(p, "b@example.com", "B")
		put(p, "a@example.com", "A")
		put(q, "c@example.com", "C in q")
		put(last, "z@example.com", "Z")
		check := func(pp engine.Part, want map[string]string) {
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
						t.Errorf("%s %s after Prefetch: %v %v; want %q", pp.Partition, email, got.Profile, ok, name)
					}
				}
				// A prefetched absent record is created, not replaced.
				return tx.Put(pp, "new@example.com", rec("N"), partmap.OpPut)
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
		err := e.Invoke(ctx, engine.Invocation{Load: []engine.Part{p}}, func(tx *engine.Tx) error {
			return tx.Prefetch(q, []string{"c@example.com"})
		})
		if !errors.Is(err, engine.ErrNotLoaded) {
			t.Fatalf("Prefetch of a partition not loaded: %v, want ErrNotLoaded", err)
		}
	})

}
