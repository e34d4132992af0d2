// Package engine runs invocations against a partitioned attribute map, in the
// vocabulary of the original design: an invocation declares up front which
// partition instances it loads and which it locks; its handler may read only
// what it loaded and write only what it locked; staged writes commit
// atomically when the handler succeeds, and not at all when it fails.
//
// Locks are taken in one order (generation, then partition), so two
// invocations can never deadlock, and a held lock either fails the
// invocation at once with partmap.ELOCKCONFLICT or is waited for up to a
// budget. Writes to different partitions never wait for each other.
//
// The engine is the only way to the backend: it hands the backend finished
// writes (backend.go), with the index entries each one changes, and passes
// on what is no invocation (Direct).
package engine

import (
	"cmp"
	"context"
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
	ErrNotLoaded  = errors.New("engine: read of a partition the invocation did not load")
	ErrNotLocked  = errors.New("engine: write to a partition the invocation did not lock")
	ErrWritten    = errors.New("engine: whole-partition read of a partition the invocation has written")
	ErrDone       = errors.New("engine: transaction used after its invocation returned")
	ErrUndeclared = errors.New("engine: access to a record the invocation did not declare")
)

// Invocation declares what a handler may touch.
type Invocation struct {
	Load []Part // partitions the handler may read
	Lock []Part // partitions the handler may write
	// Fence gives, by generation, the stage the invocation's writes expect
	// (Write.Fence); a generation it does not name is StageServing.
	Fence map[int]Stage
	// Records, when not empty, are the only records (emails) the handler
	// touches, in whichever partition; it reads no partition whole.
	// Touching another is refused (ErrUndeclared). Over a backend that
	// checks versions (Options.CheckedWrites), such an invocation that
	// locks one partition locks only these records, in process, and
	// nothing in the store: its commit checks that they are still what it
	// read (see invokeChecked).
	Records []string
}

// Bulk marks ctx's invocations as a bulk write's (an import, a sweep, a
// resize's copy, a deletion of everything): records nobody asked for, which
// a backend that caches records drops rather than stores.
func Bulk(ctx context.Context) context.Context { return context.WithValue(ctx, bulkKey{}, true) }

// IsBulk says whether ctx is marked by Bulk.
func IsBulk(ctx context.Context) bool {
	bulk, _ := ctx.Value(bulkKey{}).(bool)
	return bulk
}

type bulkKey struct{}

// Options configure an engine.
type Options struct {
	// LockWait is how long an invocation waits for a held lock; 0 means
	// partmap.DefaultLockWait, and a negative one fails at once, as the
	// original engine does.
	LockWait time.Duration
	// Indexes are the indexed fields, in the order that numbers them in
	// index entries.
	Indexes []string
	// CheckedWrites says the backend's Commit takes writes to one
	// partition without a lease and checks them (Backend.Commit): an
	// invocation that declares its records then takes no lock in the store.
	CheckedWrites bool
}

// Engine runs invocations. It is safe for concurrent use.
type Engine struct {
	Direct   // the backend's, as it is
	backend  Backend
	shared   Shared       // nil: one process owns the store
	feed     Feeder       // nil: no change feed
	signal   FeedSignaler // nil: a long poll reads the feed to see
	view     ViewReader   // nil: no view of several partitions
	hints    Hints        // nil: background work passes over every partition
	watcher  LayoutWatcher
	locks    localLocks
	records  recordLocks // instead of locks, with CheckedWrites
	checked  bool
	lockWait time.Duration
	indexes  []string
	indexer  atomic.Pointer[indexerBox]
	hooks    atomic.Pointer[Hooks]
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

// New returns an engine over backend and the optional interfaces it has.
func New(backend Backend, opts Options) *Engine {
	e := &Engine{Direct: backend, backend: backend, lockWait: cmp.Or(opts.LockWait, partmap.DefaultLockWait),
		indexes: slices.Clone(opts.Indexes), checked: opts.CheckedWrites}
	e.shared, _ = backend.(Shared)
	e.feed, _ = backend.(Feeder)
	e.signal, _ = backend.(FeedSignaler)
	e.view, _ = backend.(ViewReader)
	e.hints, _ = backend.(Hints)
	e.watcher, _ = backend.(LayoutWatcher)
	return e
}

type indexerBox struct{ Indexer }

// SetIndexer installs the search indexes' entries (nil: none): commits
// that stage their writes from then on carry them.
func (e *Engine) SetIndexer(ix Indexer) {
	if ix == nil {
		e.indexer.Store(nil)
		return
	}
	e.indexer.Store(&indexerBox{ix})
}

// SetHooks installs hooks; later invocations report to them.
func (e *Engine) SetHooks(h Hooks) { e.hooks.Store(&h) }

// Invoke runs fn under inv. When fn returns nil, its staged writes commit
// atomically and are durable before Invoke returns; otherwise nothing is
// written and fn's error is returned.
//
// fn may run more than once, each time on a fresh Tx: a checked
// invocation (see invokeChecked) runs it again when its commit finds a
// record changed or the partition locked by another server. Only the last
// run's writes commit, so anything fn reports outside the Tx must be set
// by each run, not accumulated across runs.
//
// Under partmap.DeferDurability, Invoke returns once the writes are
// visible and leaves the wait for their durability to the context's
// owner, who acknowledges nothing before it.
func (e *Engine) Invoke(ctx context.Context, inv Invocation, fn func(*Tx) error) error {
	if partmap.Deferring(ctx) {
		durable, err := e.invoke(ctx, inv, fn, true)
		if err != nil {
			return err
		}
		partmap.Defer(ctx, durable)
		return nil
	}
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

// Hold takes the locks of parts, waiting up to wait for busy ones, and
// keeps them until the lease is released, however long: the whole-map lock
// is Hold over every partition of the layouts in use. It excludes writers,
// who meanwhile get ordinary lock conflicts.
func (e *Engine) Hold(ctx context.Context, parts []Part, wait time.Duration) (Lease, error) {
	h := &held{}
	if err := e.lock(ctx, h, parts, wait); err != nil {
		return nil, err
	}
	return h, nil
}

// HoldNamed is Hold under a name kept in the store until named.Until
// (Shared.Lock): on a store that other processes share, the locks are
// the store's alone, so that they outlive this process and any server can
// take them over with the name and release them; this engine's writers
// meet them there. On a store one process owns, the locks are this
// engine's, as with Hold.
func (e *Engine) HoldNamed(ctx context.Context, parts []Part, wait time.Duration, named Named) (Lease, error) {
	if e.shared == nil {
		return e.Hold(ctx, parts, wait)
	}
	ps := slices.Clone(parts)
	slices.SortFunc(ps, Part.Compare)
	return e.shared.Lock(ctx, slices.Compact(ps), wait, named)
}

// Mark records stage on layout l's partitions (Shared.Mark), where
// several servers share the store.
func (e *Engine) Mark(ctx context.Context, l Layout, stage Stage) error {
	if e.shared == nil {
		return nil
	}
	return e.shared.Mark(ctx, l, stage)
}

// Feed reads the change feed (Feeder.Feed); a backend without one has
// none to read.
func (e *Engine) Feed(ctx context.Context, after string, limit int) (FeedPage, error) {
	if e.feed == nil {
		return FeedPage{}, partmap.Errorf(partmap.EUNSUPPORTED, "this store keeps no change feed")
	}
	return e.feed.Feed(ctx, after, limit)
}

// TrimFeed trims the change feed (Feeder.TrimFeed) or, with written, on a
// backend with Hints, only the parts they say were written or aged since
// their last trim (Hints.TrimWritten).
func (e *Engine) TrimFeed(ctx context.Context, before int64, keep int64, written bool) (partmap.FeedStats, error) {
	switch {
	case e.feed == nil:
		return partmap.FeedStats{}, nil
	case written && e.hints != nil:
		return e.hints.TrimWritten(ctx, before, keep)
	}
	return e.feed.TrimFeed(ctx, before, keep)
}

// FeedSignal is FeedSignaler.FeedSignal, or "" where the backend has no
// such sign or cannot read it now: a long poll then reads the feed to see.
func (e *Engine) FeedSignal(ctx context.Context) string {
	if e.signal == nil {
		return ""
	}
	s, _ := e.signal.FeedSignal(ctx)
	return s
}

// Serve hands the layouts the directory serves down to a LayoutWatcher.
func (e *Engine) Serve(layouts []Layout) {
	if e.watcher != nil {
		e.watcher.Serving(layouts)
	}
}

// Hinted says the backend keeps Hints: ClaimDue and ReleaseDue, theirs,
// are for a Hinted engine only.
func (e *Engine) Hinted() bool { return e.hints != nil }

// Shared says other processes may use the store too (Shared).
func (e *Engine) Shared() bool { return e.shared != nil }

func (e *Engine) ClaimDue(ctx context.Context, before int64) (DueClaim, error) {
	return e.hints.ClaimDue(ctx, before)
}

func (e *Engine) ReleaseDue(ctx context.Context, c DueClaim, skipped []Part) error {
	return e.hints.ReleaseDue(ctx, c, skipped)
}

// Forget drops the in-process locks of a generation nobody uses any more.
func (e *Engine) Forget(generation int) {
	e.locks.forget(generation)
	e.records.forget(generation)
}

// held is a set of locks: the engine's own, then the backend's.
type held struct {
	parts  []Part // sorted
	local  []chan struct{}
	whole  func() // releases the partitions recordLocks holds, instead of local
	remote Lease
	once   sync.Once
	err    error
}

func (h *held) Release() error {
	h.once.Do(func() {
		if h.remote != nil {
			h.err = h.remote.Release()
		}
		unlock(h.local)
		if h.whole != nil {
			h.whole()
		}
	})
	return h.err
}

// lock takes the engine's in-process locks of parts into h, then the
// backend's, in one wait budget.
func (e *Engine) lock(ctx context.Context, h *held, parts []Part, wait time.Duration) error {
	ps := parts
	if len(ps) > 1 {
		ps = slices.Clone(parts)
		slices.SortFunc(ps, Part.Compare)
		ps = slices.Compact(ps)
	}
	deadline := time.Now().Add(wait)
	var local []chan struct{}
	var whole func()
	var err error
	if e.checked {
		whole, err = e.records.lockParts(ctx, ps, wait)
	} else {
		local, err = e.locks.lock(ctx, ps, wait)
	}
	if err != nil {
		return err
	}
	var remote Lease
	if e.shared != nil {
		remote, err = e.shared.Lock(ctx, ps, max(0, time.Until(deadline)), Named{})
	}
	if err != nil {
		unlock(local)
		if whole != nil {
			whole()
		}
		return err
	}
	h.parts, h.local, h.whole, h.remote = ps, local, whole, remote
	return nil
}

func (e *Engine) invoke(ctx context.Context, inv Invocation, fn func(*Tx) error, later bool) (durable func() error, err error) {
	if e.checked && len(inv.Records) > 0 && len(inv.Lock) == 1 {
		return e.invokeChecked(ctx, inv, fn, later)
	}
	return e.invokeLocked(ctx, inv, fn, later, partmap.LockWaitOf(ctx, e.lockWait))
}

// invokeLocked runs an invocation under its partitions' locks, in process
// and in the store, waiting up to wait for them.
func (e *Engine) invokeLocked(ctx context.Context, inv Invocation, fn func(*Tx) error, later bool, wait time.Duration) (durable func() error, err error) {
	hooks := e.hooks.Load()
	tx := newTx(ctx, e.backend, inv)
	if len(inv.Lock) > 0 {
		t0 := time.Now()
		err = e.lock(ctx, &tx.locks, inv.Lock, wait)
		if hooks != nil && hooks.Locked != nil {
			hooks.Locked(time.Since(t0), err)
		}
		if err != nil {
			return nil, err
		}
		// Also on a panic: net/http recovers a handler's panic and carries
		// on, and a lock left held would fail every later write to it.
		defer tx.locks.Release()
	}
	return e.run(tx, fn, tx.locks.remote, func() { tx.locks.Release() }, later)
}

// InvokeHeld is Invoke under locks that hold, a lease of Hold, already
// holds: it takes none and releases none, and its commit is made under
// them. Work that holds the whole map (Hold over every partition) writes
// with it a part at a time. A part of inv.Lock that hold does not hold is
// ErrNotLocked.
func (e *Engine) InvokeHeld(ctx context.Context, hold Lease, inv Invocation, fn func(*Tx) error) error {
	h, ok := hold.(*held)
	if !ok {
		return fmt.Errorf("engine: InvokeHeld takes a lease of Hold, not %T", hold)
	}
	for _, p := range inv.Lock {
		if _, ok := slices.BinarySearchFunc(h.parts, p, Part.Compare); !ok {
			return fmt.Errorf("%w: generation %d %s is not held", ErrNotLocked, p.Generation, p.Partition)
		}
	}
	tx := newTx(ctx, e.backend, inv)
	durable, err := e.run(tx, fn, h.remote, func() {}, partmap.Deferring(ctx))
	if err != nil {
		return err
	}
	if partmap.Deferring(ctx) {
		partmap.Defer(ctx, durable)
		return nil
	}
	return durable()
}

// run runs fn on tx and commits its writes under remote, the store's
// locks, calling release once they are visible, before the wait for their
// durability.
func (e *Engine) run(tx *Tx, fn func(*Tx) error, remote Lease, release func(), later bool) (durable func() error, err error) {
	hooks := e.hooks.Load()
	err = fn(tx)
	tx.done = true
	if err == nil {
		err = tx.err // a refused access the handler swallowed still aborts
	}
	if err != nil {
		return nil, err
	}
	writes := e.finish(tx)
	if len(writes) == 0 {
		return durableNow, nil
	}
	t0 := time.Now()
	synced, err := e.backend.Commit(tx.ctx, remote, writes)
	release() // before the fsync: the next writer joins it
	return e.committed(hooks, t0, synced, err, later)
}

// committed finishes a commit that started at t0: it reports to the hooks
// and returns durable, which waits for synced now or, when later, in the
// background.
func (e *Engine) committed(hooks *Hooks, t0 time.Time, wait func() error, err error, later bool) (durable func() error, _ error) {
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
	// The wait starts now, in the background, so that the commit-latency
	// hook times the sync and not the caller, who waits only later.
	done := make(chan error, 1)
	go func() { done <- committed(wait()) }()
	return sync.OnceValue(func() error { return <-done }), nil
}

func durableNow() error { return nil }

// finish turns the staged writes into what the backend commits, in place,
// dropping those that change nothing (a record created and deleted again).
func (e *Engine) finish(tx *Tx) []Write {
	out := tx.writes[:0]
	ix := e.indexer.Load()
	for _, w := range tx.writes {
		k, _ := tx.known.get(key{w.Part, w.Email})
		prev := k.stored
		if prev == nil && w.Record == nil {
			continue
		}
		w.Created, w.Fence = prev == nil, tx.inv.Fence[w.Part.Generation]
		if prev != nil {
			w.Prev = prev.Version
		}
		// A reindex (Tx.Reindex) staged its own entries already.
		remove, add := indexChanges(e.indexes, w.Email, prev, w.Record)
		w.Remove, w.Add = append(w.Remove, remove...), append(w.Add, add...)
		if ix != nil {
			remove, add := ix.Changes(w.Email, prev, w.Record)
			w.Remove, w.Add = append(w.Remove, remove...), append(w.Add, add...)
		}
		out = append(out, w)
	}
	return out
}

// indexChanges returns the index entries a write takes out and puts in:
// only those of indexed fields whose value it changes, and the expiry
// entries whose deadline it changes.
func indexChanges(fields []string, email string, prev, next *partmap.Record) (remove, add []IndexEntry) {
	remove, add = fieldChanges(fields, email, prev, next)
	if (prev == nil || prev.Deadlines.IsZero()) && (next == nil || next.Deadlines.IsZero()) {
		return remove, add
	}
	before, after := expiryEntries(email, prev), expiryEntries(email, next)
	for _, e := range before {
		if !slices.Contains(after, e) {
			remove = append(remove, e)
		}
	}
	for _, e := range after {
		if !slices.Contains(before, e) {
			add = append(add, e)
		}
	}
	return remove, add
}

func fieldChanges(fields []string, email string, prev, next *partmap.Record) (remove, add []IndexEntry) {
	for i, f := range fields {
		var before, after string
		var had, has bool
		if prev != nil {
			before, had = prev.Profile[f]
		}
		if next != nil {
			after, has = next.Profile[f]
		}
		if had == has && before == after {
			continue
		}
		if had {
			remove = append(remove, IndexEntry{Field: i, Value: before, Email: email})
		}
		if has {
			add = append(add, IndexEntry{Field: i, Value: after, Email: email})
		}
	}
	return remove, add
}

// Tx is a handler's view of the map during one invocation. It reads through
// to the backend, sees its own staged writes, and is not safe for concurrent
// use.
type Tx struct {
	ctx     context.Context
	backend Backend
	inv     Invocation
	locks   held
	done    bool
	err     error

	writes  []Write             // staged, unfinished: Part, Email and Record only
	known   knownSet            // what this Tx has read or staged, by key
	one     [1]string           // lookup's argument to Get, kept here to save an allocation per read
	records map[string]struct{} // the declared records, when there are many
}

// newTx is a Tx for inv, its writes sized for the records it declares: a
// group of a pipeline's writes declares a thousand, and growing the slice
// a write at a time copied them ten times.
func newTx(ctx context.Context, b Backend, inv Invocation) *Tx {
	tx := &Tx{ctx: ctx, backend: b, inv: inv}
	if len(inv.Records) > 1 {
		tx.writes = make([]Write, 0, len(inv.Records))
	}
	return tx
}

type key struct {
	part  Part
	email string
}

type known struct {
	rec    *partmap.Record
	stored *partmap.Record // in the backend before this Tx
	staged int             // index into writes, or -1
}

func (tx *Tx) refuse(err error, part Part) error {
	err = fmt.Errorf("%w: generation %d %s", err, part.Generation, part.Partition)
	if tx.err == nil {
		tx.err = err
	}
	return err
}

// readable checks that the handler may read part.
func (tx *Tx) readable(part Part) error {
	if tx.done {
		return ErrDone
	}
	if !slices.Contains(tx.inv.Load, part) {
		return tx.refuse(ErrNotLoaded, part)
	}
	return nil
}

// Get returns the record of email in part, as this invocation sees it.
func (tx *Tx) Get(part Part, email string) (partmap.Record, bool, error) {
	if err := tx.readable(part); err != nil {
		return partmap.Record{}, false, err
	}
	if err := tx.declared(part, email); err != nil {
		return partmap.Record{}, false, err
	}
	k, err := tx.lookup(part, email)
	if err != nil || k.rec == nil {
		return partmap.Record{}, false, err
	}
	return *k.rec, true, nil
}

// Prefetch reads the records of emails in part together, for a handler
// about to touch them all: one backend read instead of one each. Later
// Gets and writes of them read nothing more.
func (tx *Tx) Prefetch(part Part, emails []string) error {
	if err := tx.readable(part); err != nil {
		return err
	}
	var todo []string
	for _, e := range emails {
		if err := tx.declared(part, e); err != nil {
			return err
		}
		if _, ok := tx.known.get(key{part, e}); !ok {
			todo = append(todo, e)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	recs, err := tx.backend.Get(tx.ctx, part, todo)
	if err != nil {
		return err
	}
	if len(recs) != len(todo) {
		return fmt.Errorf("engine: Get returned %d records for %d emails", len(recs), len(todo))
	}
	for i, e := range todo {
		tx.known.put(key{part, e}, known{rec: recs[i], stored: recs[i], staged: -1})
	}
	return nil
}

// Put stages rec as the record of email in part, as change (Write.Change;
// Move for a copy that changes nothing).
func (tx *Tx) Put(part Part, email string, rec partmap.Record, change partmap.OpKind) error {
	return tx.stage(part, email, &rec, change, false)
}

// Copy stages rec, a record read from another generation, as it is, commit
// time included, and records no event: a resize's copy.
func (tx *Tx) Copy(part Part, email string, rec partmap.Record) error {
	return tx.stage(part, email, &rec, Move, true)
}

// Reindex stages email's record in part as it is, with the search
// entries add and remove and no event: a search index's build or drop.
// rec, when not nil, is the record as this invocation's Scan of part
// read it, which saves reading it again. A record that does not exist is
// left alone.
func (tx *Tx) Reindex(part Part, email string, rec *partmap.Record, remove, add []IndexEntry) error {
	if rec != nil {
		if _, ok := tx.known.get(key{part, email}); !ok {
			tx.known.put(key{part, email}, known{rec: rec, stored: rec, staged: -1})
		}
	}
	k, err := tx.lookup(part, email)
	if err != nil || k.stored == nil {
		return err
	}
	if err := tx.stage(part, email, k.stored, Move, true); err != nil {
		return err
	}
	k, _ = tx.known.get(key{part, email})
	w := &tx.writes[k.staged]
	w.Remove, w.Add = append(w.Remove, remove...), append(w.Add, add...)
	return nil
}

// Delete stages the removal of email from part, as change. Deleting an
// absent record writes nothing but still requires the lock.
func (tx *Tx) Delete(part Part, email string, change partmap.OpKind) error {
	return tx.stage(part, email, nil, change, false)
}

// stage records a write; a later one of the same record replaces it, its
// change too, so that a transaction's event names its last operation.
func (tx *Tx) stage(part Part, email string, rec *partmap.Record, change partmap.OpKind, copied bool) error {
	if tx.done {
		return ErrDone
	}
	if !slices.Contains(tx.inv.Lock, part) {
		return tx.refuse(ErrNotLocked, part)
	}
	if err := tx.declared(part, email); err != nil {
		return err
	}
	// The write reads too, even when the handler did not: the backend must
	// know whether the record existed. The partition is locked, so the read
	// stays true until the commit.
	k, err := tx.lookup(part, email)
	if err != nil {
		return err
	}
	if k.staged < 0 {
		if rec == nil && k.stored == nil {
			return nil // nothing to delete
		}
		k.staged = len(tx.writes)
		tx.writes = append(tx.writes, Write{Part: part, Email: email})
	}
	tx.writes[k.staged].Record = rec
	tx.writes[k.staged].Change = change
	tx.writes[k.staged].Copy = copied
	k.rec = rec
	tx.known.put(key{part, email}, k)
	return nil
}

// lookup reads a record once per invocation.
func (tx *Tx) lookup(part Part, email string) (known, error) {
	if k, ok := tx.known.get(key{part, email}); ok {
		return k, nil
	}
	tx.one[0] = email
	rec, err := getOne(tx.ctx, tx.backend, part, tx.one[:])
	if err != nil {
		return known{}, err
	}
	k := known{rec: rec, stored: rec, staged: -1}
	tx.known.put(key{part, email}, k)
	return k, nil
}

// scanPage is how many records a whole-partition read asks for at a time.
const scanPage = 1000

// Scan returns every record of part, in email order, as stored before this
// invocation: for a handler that needs a whole partition, such as a check
// or a resize's copy. A partition the invocation has written is refused
// (ErrWritten), since the answer would not show those writes.
func (tx *Tx) Scan(part Part) ([]Item, error) {
	if err := tx.unwritten(part); err != nil {
		return nil, err
	}
	var out []Item
	q := Query{Generation: part.Generation, After: &Position{Partition: part.Partition}, End: part.Partition + 1, Limit: scanPage}
	for {
		items, err := tx.backend.Scan(tx.ctx, q)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
		if len(items) < q.Limit {
			return out, nil
		}
		q.After = &items[len(items)-1].Position
	}
}

// ScanPage returns up to limit records of part after the email after ("":
// from the first), in email order, as stored before this invocation: for a
// handler that reads a big partition a slice at a time.
func (tx *Tx) ScanPage(part Part, after string, limit int) ([]Item, error) {
	if err := tx.unwritten(part); err != nil {
		return nil, err
	}
	return tx.backend.Scan(tx.ctx, Query{Generation: part.Generation, After: &Position{Partition: part.Partition, Email: after},
		End: part.Partition + 1, Limit: limit})
}

// Count returns part's stored profile count, as stored before this
// invocation.
func (tx *Tx) Count(part Part) (int64, error) {
	if err := tx.unwritten(part); err != nil {
		return 0, err
	}
	counts, err := tx.backend.Counts(tx.ctx, part.Generation, part.Partition, part.Partition+1)
	if err != nil || len(counts) == 0 {
		return 0, err
	}
	return counts[0].Profiles, nil
}

// IndexEntries returns every index entry stored in part, as stored before
// this invocation.
func (tx *Tx) IndexEntries(part Part) ([]IndexEntry, error) {
	if err := tx.unwritten(part); err != nil {
		return nil, err
	}
	return tx.backend.IndexEntries(tx.ctx, part)
}

// unwritten checks that the handler may read part whole: it loaded part,
// declared no records and has staged nothing there.
func (tx *Tx) unwritten(part Part) error {
	if err := tx.readable(part); err != nil {
		return err
	}
	if len(tx.inv.Records) > 0 {
		return tx.refuse(ErrUndeclared, part)
	}
	if slices.ContainsFunc(tx.writes, func(w Write) bool { return w.Part == part }) {
		return tx.refuse(ErrWritten, part)
	}
	return nil
}
