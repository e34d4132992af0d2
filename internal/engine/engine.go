// Package engine runs invocations against a partitioned attribute map, in the
// vocabulary of the original design: an invocation declares up front which
// partition instances it loads and which it locks; its handler may read only
// what it loaded and write only what it locked; staged writes commit
// atomically when the handler succeeds, and not at all when it fails.
//
// Locks are taken in ascending partition order, so two invocations can never
// deadlock, and a held lock either fails the invocation at once with
// partmap.ELOCKCONFLICT or is waited for up to a budget. Writes to different
// partitions never wait for each other.
package engine

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partmap/partmap"
)

// Programming errors the engine refuses. They surface as internal errors and
// poison the invocation: nothing it staged is committed.
var (
	ErrNotLoaded = errors.New("engine: read of a partition the invocation did not load")
	ErrNotLocked = errors.New("engine: write to a partition the invocation did not lock")
	ErrDone      = errors.New("engine: transaction used after its invocation returned")
)

// Meta is the persisted description of a directory.
type Meta struct {
	Schema     int    `json:"schema"`
	Partitions int    `json:"partitions"`
	Started    bool   `json:"started"`
	CursorKey  []byte `json:"cursorKey"` // authenticates enumeration cursors
	// Indexes are the fields with a secondary index, in a fixed order: an
	// index entry names its field by position in this list.
	Indexes []string `json:"indexes,omitempty"`
	// Version numbers the directory's layout: each resize makes the next
	// one, in a key space of its own.
	Version int `json:"version,omitempty"`
	// Resize is the resize in progress, if any.
	Resize *Resize `json:"resize,omitempty"`
	// Retired are the versions resizes replaced, until each has been
	// marked and deleted: a server that opens finishes the job.
	Retired []Retired `json:"retired,omitempty"`
}

// Retired is a replaced layout version.
type Retired struct {
	Version    int `json:"version"`
	Partitions int `json:"partitions"`
}

// Resize is a resize in progress: every profile is being copied into the
// next version, of Partitions partitions. Partitions of the current version
// below Copied have been copied; writes meanwhile go to both versions.
type Resize struct {
	Partitions int `json:"partitions"`
	Version    int `json:"version"`
	Copied     int `json:"copied"`
	// Epoch counts restarts of the copy; a mover whose epoch is no longer
	// the metadata's stops, since another has started over.
	Epoch int `json:"epoch,omitempty"`
}

// NewMeta describes a new directory, with a fresh random cursor key.
func NewMeta(schema, partitions int, indexes []string) Meta {
	key := make([]byte, 32)
	rand.Read(key)
	return Meta{Schema: schema, Partitions: partitions, CursorKey: key, Indexes: indexes}
}

// Write is one staged change. Previous is the record it replaces (nil when
// there was none), so that a backend can keep per-partition counts and
// secondary indexes without reading.
type Write struct {
	Partition partmap.Partition
	Email     string
	Record    *partmap.Record // nil deletes
	Existed   bool
	Previous  *partmap.Record // the stored record before this invocation
}

// Lease is a set of held partition locks. Release must be safe to call more
// than once.
type Lease interface {
	Release()
}

// Locker grants partition locks. Lock must acquire in ascending order, fail
// with partmap.ELOCKCONFLICT when a lock is still held after wait, and hold
// nothing when it fails.
type Locker interface {
	Lock(ctx context.Context, partitions []partmap.Partition, wait time.Duration) (Lease, error)
}

// Backend stores records. A backend's Get sees every write that Commit has
// returned from, durable or not yet, so the next holder of a lock always
// reads what the previous holder wrote.
type Backend interface {
	Locker
	// Get returns the record of email in partition p; ok is false if absent.
	Get(ctx context.Context, p partmap.Partition, email string) (rec partmap.Record, ok bool, err error)
	// Commit applies writes atomically under lease. It returns once they are
	// visible; the returned wait blocks until they are durable. Splitting the
	// two lets the engine release locks before the fsync, so that writers to
	// one partition share syncs (group commit) instead of queueing on them.
	Commit(ctx context.Context, lease Lease, writes []Write) (wait func() error, err error)
}

// BatchGetter is a Backend that reads many records of one partition at once
// more cheaply than one by one: one Pebble iterator instead of a lookup
// each, one Redis round trip instead of many.
type BatchGetter interface {
	// GetBatch returns the records of emails in partition p, in the order
	// of emails, with nil for those absent.
	GetBatch(ctx context.Context, p partmap.Partition, emails []string) ([]*partmap.Record, error)
}

// Invocation declares what a handler may touch.
type Invocation struct {
	Load []partmap.Partition // partitions the handler may read
	Lock []partmap.Partition // partitions the handler may write
}

// Engine runs invocations. It is safe for concurrent use.
type Engine struct {
	backend    Backend
	partitions int
	lockWait   time.Duration
	hooks      atomic.Pointer[Hooks]
}

// Hooks observe an engine's work, for metrics. They must be quick and safe
// for concurrent use; a nil field is skipped.
type Hooks struct {
	// Locked gets how long taking an invocation's locks took, and whether
	// it succeeded.
	Locked func(d time.Duration, err error)
	// Committed gets how long a commit took from the backend's Commit until
	// its writes were durable, and whether it succeeded.
	Committed func(d time.Duration, err error)
}

// SetHooks installs hooks; later invocations report to them.
func (e *Engine) SetHooks(h Hooks) { e.hooks.Store(&h) }

// New returns an engine over backend for a map of n partitions. lockWait is
// how long an invocation waits for a held lock; 0 fails at once.
func New(backend Backend, n int, lockWait time.Duration) *Engine {
	return &Engine{backend: backend, partitions: n, lockWait: lockWait}
}

// Partitions returns the partition count.
func (e *Engine) Partitions() int { return e.partitions }

// Invoke runs fn under inv. When fn returns nil, its staged writes commit
// atomically and are durable before Invoke returns; otherwise nothing is
// written and fn's error is returned.
func (e *Engine) Invoke(ctx context.Context, inv Invocation, fn func(*Tx) error) error {
	durable, err := e.invoke(ctx, inv, fn, false)
	if err != nil {
		return err
	}
	return durable()
}

// InvokeVisible is Invoke without the wait for durability: it returns once
// fn's writes are committed and visible, and durable blocks until they are
// on disk. A caller that commits many invocations for one reply, like a
// bulk write, waits for them all at the end, so that its invocations share
// fsyncs instead of each queueing on one. Nothing may be acknowledged
// before durable returns nil.
func (e *Engine) InvokeVisible(ctx context.Context, inv Invocation, fn func(*Tx) error) (durable func() error, err error) {
	return e.invoke(ctx, inv, fn, true)
}

func (e *Engine) invoke(ctx context.Context, inv Invocation, fn func(*Tx) error, later bool) (durable func() error, err error) {
	for _, ps := range [][]partmap.Partition{inv.Load, inv.Lock} {
		for _, p := range ps {
			if int(p) >= e.partitions {
				return nil, fmt.Errorf("engine: %s is outside a map of %d partitions", p, e.partitions)
			}
		}
	}
	tx := &Tx{ctx: ctx, backend: e.backend, loads: inv.Load, locks: inv.Lock}
	return e.run(ctx, tx, inv.Lock, fn, later)
}

// InvokeExclusive runs fn holding the whole-map lock: every partition lock,
// taken in order, so it excludes every writer. fn may read and write any
// partition. Writers meanwhile see the usual lock conflicts.
func (e *Engine) InvokeExclusive(ctx context.Context, fn func(*Tx) error) error {
	all := make([]partmap.Partition, e.partitions)
	for i := range all {
		all[i] = partmap.Partition(i)
	}
	tx := &Tx{ctx: ctx, backend: e.backend, exclusive: true}
	durable, err := e.run(ctx, tx, all, fn, false)
	if err != nil {
		return err
	}
	return durable()
}

func durableNow() error { return nil }

// run runs fn and commits its writes. The returned durable waits for them
// to be durable; with later, the caller will call it only later, so the
// wait starts now, in the background, for the commit-latency hook to time
// the commit and not the caller.
func (e *Engine) run(ctx context.Context, tx *Tx, lock []partmap.Partition, fn func(*Tx) error, later bool) (durable func() error, err error) {
	hooks := e.hooks.Load()
	var lease Lease
	if len(lock) > 0 {
		t0 := time.Now()
		var err error
		lease, err = e.backend.Lock(ctx, lock, e.lockWait)
		if hooks != nil && hooks.Locked != nil {
			hooks.Locked(time.Since(t0), err)
		}
		if err != nil {
			return nil, err
		}
	}
	release := func() {
		if lease != nil {
			lease.Release()
		}
	}
	// Also on a panic: net/http recovers a handler's panic and carries on,
	// and a lock left held would fail every later write to the partition.
	defer release()
	err = fn(tx)
	tx.done = true
	if err == nil {
		err = tx.err // a refused access the handler swallowed still aborts
	}
	if err != nil {
		release()
		return nil, err
	}
	if len(tx.writes) == 0 {
		release()
		return durableNow, nil
	}
	t0 := time.Now()
	wait, err := e.backend.Commit(ctx, lease, tx.writes)
	release()
	committed := func(err error) error {
		if hooks != nil && hooks.Committed != nil {
			hooks.Committed(time.Since(t0), err)
		}
		return err
	}
	if err != nil {
		return nil, committed(err)
	}
	if !later {
		return func() error { return committed(wait()) }, nil
	}
	done := make(chan error, 1)
	go func() { done <- committed(wait()) }()
	return sync.OnceValue(func() error { return <-done }), nil
}

// Tx is a handler's view of the map during one invocation. It reads through
// to the backend, sees its own staged writes, and is not safe for concurrent
// use.
type Tx struct {
	ctx       context.Context
	backend   Backend
	loads     []partmap.Partition
	locks     []partmap.Partition
	exclusive bool
	done      bool
	err       error

	writes []Write
	known  map[key]known // what this Tx has read or staged, by key
}

type key struct {
	p     partmap.Partition
	email string
}

type known struct {
	rec     *partmap.Record
	existed bool // in the backend before this Tx
	staged  int  // index into writes, or -1
}

func (tx *Tx) refuse(err error, p partmap.Partition) error {
	err = fmt.Errorf("%w: %s", err, p)
	if tx.err == nil {
		tx.err = err
	}
	return err
}

// Get returns the record of email in p, as this invocation sees it.
func (tx *Tx) Get(p partmap.Partition, email string) (partmap.Record, bool, error) {
	if tx.done {
		return partmap.Record{}, false, ErrDone
	}
	if !tx.exclusive && !slices.Contains(tx.loads, p) {
		return partmap.Record{}, false, tx.refuse(ErrNotLoaded, p)
	}
	k, err := tx.lookup(p, email)
	if err != nil || k.rec == nil {
		return partmap.Record{}, false, err
	}
	return *k.rec, true, nil
}

// Prefetch reads the records of emails in p together, for a handler about
// to touch them all; later Gets and writes of them read nothing more. With
// a backend that cannot read them together it does nothing, and each is
// read when first touched.
func (tx *Tx) Prefetch(p partmap.Partition, emails []string) error {
	if tx.done {
		return ErrDone
	}
	if !tx.exclusive && !slices.Contains(tx.loads, p) {
		return tx.refuse(ErrNotLoaded, p)
	}
	bg, ok := tx.backend.(BatchGetter)
	if !ok {
		return nil
	}
	var todo []string
	for _, e := range emails {
		if _, ok := tx.known[key{p, e}]; !ok {
			todo = append(todo, e)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	recs, err := bg.GetBatch(tx.ctx, p, todo)
	if err != nil {
		return err
	}
	if len(recs) != len(todo) {
		return fmt.Errorf("engine: GetBatch returned %d records for %d emails", len(recs), len(todo))
	}
	if tx.known == nil {
		tx.known = make(map[key]known, len(todo))
	}
	for i, e := range todo {
		tx.known[key{p, e}] = known{rec: recs[i], existed: recs[i] != nil, staged: -1}
	}
	return nil
}

// Put stages rec as the record of email in p.
func (tx *Tx) Put(p partmap.Partition, email string, rec partmap.Record) error {
	return tx.stage(p, email, &rec)
}

// Delete stages the removal of email from p. Deleting an absent record is a
// no-op for the backend but still requires the lock.
func (tx *Tx) Delete(p partmap.Partition, email string) error {
	return tx.stage(p, email, nil)
}

func (tx *Tx) stage(p partmap.Partition, email string, rec *partmap.Record) error {
	if tx.done {
		return ErrDone
	}
	if !tx.exclusive && !slices.Contains(tx.locks, p) {
		return tx.refuse(ErrNotLocked, p)
	}
	k, err := tx.lookup(p, email)
	if err != nil {
		return err
	}
	if k.staged < 0 {
		if rec == nil && !k.existed {
			return nil // nothing to delete
		}
		k.staged = len(tx.writes)
		tx.writes = append(tx.writes, Write{Partition: p, Email: email, Existed: k.existed, Previous: k.rec})
	}
	tx.writes[k.staged].Record = rec
	k.rec = rec
	tx.known[key{p, email}] = k
	return nil
}

// lookup reads a record once per invocation. The write path reads too, even
// when the handler did not, because the backend needs to know whether the
// record existed; that read is safe because the partition is locked.
func (tx *Tx) lookup(p partmap.Partition, email string) (known, error) {
	if k, ok := tx.known[key{p, email}]; ok {
		return k, nil
	}
	rec, ok, err := tx.backend.Get(tx.ctx, p, email)
	if err != nil {
		return known{}, err
	}
	k := known{existed: ok, staged: -1}
	if ok {
		k.rec = &rec
	}
	if tx.known == nil {
		tx.known = make(map[key]known, 1)
	}
	tx.known[key{p, email}] = k
	return k, nil
}
