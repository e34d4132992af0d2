package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/partmap/partmap"
)

// slowSync is a backend whose commits are visible at once but durable only
// when the test says so, to show what the engine does between the two.
type slowSync struct {
	Backend // the methods the engine does not call here
	mu      sync.Mutex
	records map[string]partmap.Record
	durable chan struct{}
	waiting chan struct{}
}

func (b *slowSync) Lock(context.Context, []Part, time.Duration, Named) (Lease, error) {
	return nil, nil
}

func (b *slowSync) Get(_ context.Context, _ Part, emails []string) ([]*partmap.Record, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]*partmap.Record, len(emails))
	for i, e := range emails {
		if r, ok := b.records[e]; ok {
			out[i] = &r
		}
	}
	return out, nil
}

func (b *slowSync) Commit(_ context.Context, _ Lease, writes []Write) (func() error, error) {
	b.mu.Lock()
	for _, w := range writes {
		b.records[w.Email] = *w.Record
	}
	b.mu.Unlock()
	return func() error {
		b.waiting <- struct{}{}
		<-b.durable
		return nil
	}, nil
}

// The engine releases the partition lock once a commit is visible, before
// its fsync: the next writer of the partition goes ahead and shares the
// sync instead of queueing behind it.
func TestLockIsReleasedBeforeTheSync(t *testing.T) {
	b := &slowSync{records: map[string]partmap.Record{}, durable: make(chan struct{}), waiting: make(chan struct{}, 2)}
	e := New(b, Options{LockWait: -1}) // fail fast: a held lock shows as a conflict
	ctx := context.Background()
	p3 := Part{Partition: 3}
	inv := Invocation{Load: []Part{{Partition: 3}}, Lock: []Part{{Partition: 3}}}
	rec := partmap.Record{Profile: partmap.Profile{"a": "1"}, Version: 1}
	first := make(chan error)
	go func() { first <- e.Invoke(ctx, inv, func(tx *Tx) error { return tx.Put(p3, "a", rec, partmap.OpPut) }) }()
	<-b.waiting // the first write is visible and waits for its sync
	second := make(chan error)
	go func() {
		second <- e.Invoke(ctx, inv, func(tx *Tx) error {
			if _, ok, _ := tx.Get(p3, "a"); !ok {
				t.Error("the second writer does not see the first write")
			}
			return tx.Put(p3, "b", rec, partmap.OpPut)
		})
	}()
	select {
	case <-b.waiting: // the second write got the lock and reached its sync
	case err := <-second:
		t.Fatalf("the second writer failed while the first waited for its sync: %v", err)
	}
	close(b.durable)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
}

func TestTxIsDeadAfterItsInvocation(t *testing.T) {
	b := &slowSync{records: map[string]partmap.Record{}, durable: make(chan struct{}), waiting: make(chan struct{}, 1)}
	close(b.durable)
	e := New(b, Options{LockWait: -1})
	var kept *Tx
	p1 := Part{Partition: 1}
	inv := Invocation{Load: []Part{{Partition: 1}}, Lock: []Part{{Partition: 1}}}
	if err := e.Invoke(context.Background(), inv, func(tx *Tx) error { kept = tx; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := kept.Put(p1, "late", partmap.Record{Version: 1}, partmap.OpPut); !errors.Is(err, ErrDone) {
		t.Fatalf("Put after the invocation: %v", err)
	}
	if _, _, err := kept.Get(p1, "late"); !errors.Is(err, ErrDone) {
		t.Fatalf("Get after the invocation: %v", err)
	}
	if _, ok := b.records["late"]; ok {
		t.Fatal("a write after the invocation was stored")
	}
}

// A handler that panics (net/http recovers it and serves on) must not leave
// its partition locked.
func TestPanicReleasesTheLock(t *testing.T) {
	b := &slowSync{records: map[string]partmap.Record{}}
	e := New(b, Options{LockWait: -1})
	inv := Invocation{Lock: []Part{{Partition: 7}}}
	func() {
		defer func() { recover() }()
		e.Invoke(context.Background(), inv, func(*Tx) error { panic("handler bug") })
	}()
	if err := e.Invoke(context.Background(), inv, func(*Tx) error { return nil }); err != nil {
		t.Fatalf("after a panicking handler: %v", err)
	}
}

// InvokeVisible returns before the sync, and its commit is timed until the
// sync completes, not until its caller gets round to waiting: a bulk
// write waits for all its invocations at the end, and the commit-latency
// metric must not count that.
func TestInvokeVisibleTimesTheSyncNotTheCaller(t *testing.T) {
	b := &slowSync{records: map[string]partmap.Record{}, durable: make(chan struct{}), waiting: make(chan struct{}, 1)}
	e := New(b, Options{LockWait: -1})
	timed := make(chan error, 1)
	e.SetHooks(Hooks{Committed: func(_ time.Duration, err error) { timed <- err }})
	inv := Invocation{Lock: []Part{{Partition: 2}}}
	var durable func() error
	returned := make(chan error, 1)
	go func() {
		var err error
		durable, err = e.InvokeVisible(context.Background(), inv, func(tx *Tx) error {
			return tx.Put(Part{Partition: 2}, "a", partmap.Record{Version: 1}, partmap.OpPut)
		})
		returned <- err
	}()
	select {
	case err := <-returned:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("InvokeVisible waits for the sync")
	}
	select { // the sync is awaited although nobody called durable
	case <-b.waiting:
	case <-time.After(time.Minute):
		t.Fatal("the sync waits for the caller")
	}
	select {
	case <-timed:
		t.Fatal("the commit was timed before its sync")
	default:
	}
	close(b.durable)
	if err := <-timed; err != nil { // timed with durable still uncalled
		t.Fatal(err)
	}
	if err := durable(); err != nil {
		t.Fatal(err)
	}
	if err := durable(); err != nil {
		t.Fatalf("a second call: %v", err)
	}
}

// recorder keeps what the engine hands Commit.
type recorder struct {
	slowSync
	got []Write
}

func (r *recorder) Commit(_ context.Context, _ Lease, writes []Write) (func() error, error) {
	r.got = append(r.got, writes...)
	return durableNow, nil
}

// The backend gets finished writes: whether each creates its profile, the
// index entries it takes out and puts in, the mark it expects of its
// generation, and none for a record created and deleted again.
func TestCommitGetsFinishedWrites(t *testing.T) {
	b := &recorder{slowSync: slowSync{records: map[string]partmap.Record{
		"old@example.com": {Profile: partmap.Profile{"tier": "gold", "city": "Oslo"}, Version: 1},
	}}}
	e := New(b, Options{LockWait: -1, Indexes: []string{"city", "tier"}})
	cur, next := Part{Generation: 3, Partition: 1}, Part{Generation: 4, Partition: 9}
	inv := Invocation{Load: []Part{cur, next}, Lock: []Part{cur, next}, Fence: map[int]Stage{3: StageResizing}}
	err := e.Invoke(context.Background(), inv, func(tx *Tx) error {
		tx.Put(cur, "old@example.com", partmap.Record{Profile: partmap.Profile{"tier": "silver", "city": "Oslo"}, Version: 2}, partmap.OpPut)
		tx.Put(next, "new@example.com", partmap.Record{Profile: partmap.Profile{"city": "Rome"}, Version: 3}, partmap.OpPut)
		tx.Put(cur, "gone@example.com", partmap.Record{Version: 4}, partmap.OpPut)
		return tx.Delete(cur, "gone@example.com", partmap.OpDelete)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.got) != 2 {
		t.Fatalf("the backend got %d writes, want 2: %+v", len(b.got), b.got)
	}
	old, created := b.got[0], b.got[1]
	if old.Created || old.Fence != StageResizing || len(old.Remove) != 1 || old.Remove[0] != (IndexEntry{Field: 1, Value: "gold", Email: "old@example.com"}) ||
		len(old.Add) != 1 || old.Add[0] != (IndexEntry{Field: 1, Value: "silver", Email: "old@example.com"}) {
		t.Errorf("replacement: %+v", old)
	}
	if !created.Created || created.Fence != StageServing || len(created.Remove) != 0 ||
		len(created.Add) != 1 || created.Add[0] != (IndexEntry{Field: 0, Value: "Rome", Email: "new@example.com"}) {
		t.Errorf("creation: %+v", created)
	}
}
