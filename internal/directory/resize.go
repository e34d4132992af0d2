package directory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

// A resize rehashes every profile into a new layout version with another
// partition count, while the directory keeps serving:
//
//  1. Under the whole-map lock, the metadata records the resize and the
//     directory swaps in a layout with both versions. From then on every
//     write goes to both, in one commit: the current version (which keeps
//     serving reads, listings and searches) and the next.
//  2. A mover copies the current version partition by partition, each under
//     its lock and the locks of the next partitions its profiles go to, and
//     records its progress, so that a resize interrupted by a crash resumes
//     where it was. Writes make the next version's copy of a profile equal
//     to the current's, and so does the copy, so when the last partition is
//     copied the next version is complete.
//  3. Under the whole-map lock of both versions, the metadata switches to
//     the next version and the directory swaps in a layout of it alone.
//  4. Once nothing reads the old version any more, it is deleted.

// resizer is the directory's mover, when one runs in this process.
type resizer struct {
	mu      sync.Mutex
	stop    context.CancelFunc // ends every mover and drop: Close calls it
	base    context.Context
	run     *moverRun // the last mover started; nil if none
	drops   sync.WaitGroup
	closed  bool
	copied  atomic.Int64
	lastErr atomic.Pointer[string]

	// retiredMu, not mu, guards retired: a mover takes it while a new
	// Resize, holding mu, may be waiting for that mover to return.
	retiredMu sync.Mutex
	retired   []*layout // layouts over the version being replaced
}

// moverRun is one mover goroutine, for one resize.
type moverRun struct {
	layout *layout
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

func (m *moverRun) finished() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// resizeRetry bounds the mover's backoff after a failure (a lock conflict,
// Redis failing over): it retries until it succeeds or the store closes.
const resizeRetry = 2 * time.Second

// errRetarget: a partition gained a profile bound for a next partition the
// copy did not lock; plan again.
var errRetarget = errors.New("directory: the partition's profiles changed; lock again")

func (d *Directory) Resize(ctx context.Context, partitions int) (partmap.ResizeStatus, error) {
	if partitions < 1 || partitions > partmap.MaxPartitions {
		return partmap.ResizeStatus{}, partmap.Errorf(partmap.EINVALID, "partitions must be from 1 to %d, not %d", partmap.MaxPartitions, partitions)
	}
	if err := d.checkStarted(ctx); err != nil {
		return partmap.ResizeStatus{}, err
	}
	r := &d.resizer
	r.mu.Lock()
	defer r.mu.Unlock()
	L := d.layout.Load()
	switch {
	case L.next != nil && L.next.Partitions != partitions:
		return partmap.ResizeStatus{}, partmap.Errorf(partmap.EINVALID,
			"a resize from %d to %d partitions is in progress; let it finish first", L.cur.Partitions, L.next.Partitions)
	case L.next != nil:
		d.startMover(L) // resumes it here if no mover runs
		return d.ResizeStatus(ctx)
	case partitions == L.cur.Partitions:
		return partmap.ResizeStatus{}, partmap.Errorf(partmap.EINVALID, "the directory already has %d partitions", partitions)
	}
	hold, err := L.backend.HoldAll(ctx, wholeMapWait)
	if err != nil {
		return partmap.ResizeStatus{}, err
	}
	// From here on the request's cancellation must not cut the start in
	// half: the metadata and the marks go together.
	ctx = context.WithoutCancel(ctx)
	meta, err := d.spaces.UpdateMeta(ctx, func(m *engine.Meta) error {
		if m.Resize != nil || m.Version != L.cur.Version {
			return ErrStale
		}
		m.Resize = &engine.Resize{Partitions: partitions, Version: m.Version + 1}
		return nil
	})
	if err != nil {
		hold.Release()
		if err == ErrStale {
			// Another server resized meanwhile, or its last resize is still
			// being cleaned up: catch up, and let the caller ask again.
			d.reload(L)
			return partmap.ResizeStatus{}, partmap.Errorf(partmap.ELOCKCONFLICT, "another server changed the layout meanwhile; ask again")
		}
		return partmap.ResizeStatus{}, err
	}
	// Other servers' writes to the current version now fail as stale until
	// they reload the layout and write both versions. Should marking fail
	// here, the mover marks again before it copies anything.
	d.spaces.Mark(ctx, L.cur, StateResizing)
	L1 := d.newLayout(L.cur, &Space{Version: meta.Resize.Version, Partitions: partitions})
	d.layout.Store(L1)
	r.retiredMu.Lock()
	r.retired = append(r.retired, L)
	r.retiredMu.Unlock()
	r.copied.Store(0)
	if err := hold.Release(); err != nil {
		// Lost before the swap was visible to other servers' writes: the
		// mover's copies fix what they wrote to the current version alone.
		r.setErr(err)
	}
	d.startMover(L1)
	return d.ResizeStatus(ctx)
}

// ResumeResize starts the mover if the metadata records a resize in
// progress, as after a crash. Stores call it once they are open.
//
// Where a write to both versions commits in two steps (Redis), a crash may
// have left a profile's versions apart: the next version holds a write the
// current one never got. The copy then starts over: under the whole-map
// lock, the next version is emptied, and a new epoch tells any other
// server's mover to stop.
func (d *Directory) ResumeResize() error {
	r := &d.resizer
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A switch or a drop cut short: mark the old version retired before
	// serving, then delete it.
	if err := d.finishRetired(ctx); err != nil {
		return fmt.Errorf("finishing the removal of the layout a resize replaced: %w", err)
	}
	L := d.layout.Load()
	if L.next == nil {
		return nil
	}
	if d.spaces.SplitCommits() {
		err := d.retry(ctx, func() error { return d.restartCopy(ctx, L) })
		if err == ErrStale {
			return nil // another server finished it meanwhile: the next call sees
		}
		if err != nil {
			return fmt.Errorf("resuming the resize to %d partitions: %w", L.next.Partitions, err)
		}
	}
	d.startMover(L)
	return nil
}

func (d *Directory) restartCopy(ctx context.Context, L *layout) error {
	hold, err := L.backend.HoldAll(ctx, wholeMapWait)
	if err != nil {
		return err
	}
	defer hold.Release()
	if err := d.spaces.Drop(ctx, *L.next); err != nil {
		return err
	}
	_, err = d.spaces.UpdateMeta(ctx, func(m *engine.Meta) error {
		if m.Resize == nil || m.Resize.Version != L.next.Version {
			return ErrStale
		}
		m.Resize.Copied = 0
		m.Resize.Epoch++
		return nil
	})
	return err
}

// startMover runs the mover on L unless one runs on it; r.mu is held.
func (d *Directory) startMover(L *layout) {
	r := &d.resizer
	if r.closed {
		return
	}
	if r.run != nil && !r.run.finished() {
		if r.run.layout == L {
			return
		}
		// The previous resize's mover has switched layouts and is about to
		// return: let it.
		<-r.run.done
	}
	if r.base == nil {
		r.base, r.stop = context.WithCancel(context.Background())
	}
	ctx, cancel := context.WithCancel(r.base)
	run := &moverRun{layout: L, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	r.run = run
	go func() {
		defer close(run.done)
		if err := d.move(ctx, L); err != nil && ctx.Err() == nil {
			r.setErr(err)
		}
	}()
}

func (r *resizer) setErr(err error) {
	msg := partmap.ErrorMessage(err)
	if msg == "" || partmap.ErrorCode(err) == partmap.EINTERNAL {
		msg = err.Error()
	}
	r.lastErr.Store(&msg)
}

// Close stops the mover, if one runs (a later open resumes it), and any
// removal of an old version (a later open finishes it).
func (d *Directory) Close() {
	r := &d.resizer
	r.mu.Lock()
	r.closed = true
	run, stop := r.run, r.stop
	r.mu.Unlock()
	if stop != nil {
		stop() // the mover, and the drops of earlier movers too
	}
	if run != nil {
		<-run.done
	}
	r.drops.Wait()
	// A whole-map lock an operator holds goes too (on Redis, its keep-alive
	// would otherwise outlive the store).
	w := &d.wholeMap
	w.mu.Lock()
	lease := w.lease
	w.mu.Unlock()
	if lease != "" {
		d.UnlockWholeMap(context.Background(), lease)
	}
}

// retry runs fn until it succeeds or ctx ends, backing off after failures.
// ErrStale ends it too: another server has moved the layout on.
func (d *Directory) retry(ctx context.Context, fn func() error) error {
	backoff := 10 * time.Millisecond
	for {
		err := fn()
		if err == nil || err == ErrStale || ctx.Err() != nil {
			return err
		}
		d.resizer.setErr(err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, resizeRetry)
	}
}

func (d *Directory) move(ctx context.Context, L *layout) error {
	r := &d.resizer
	meta, err := L.backend.Meta(ctx)
	if err != nil {
		return err
	}
	from, epoch := 0, 0
	if meta.Resize != nil && meta.Resize.Version == L.next.Version {
		from, epoch = meta.Resize.Copied, meta.Resize.Epoch
	}
	// superseded reports whether another server has started the copy over
	// (or finished the resize): this mover then stops.
	superseded := func() bool {
		m, err := L.backend.Meta(ctx)
		return err == nil && (m.Resize == nil || m.Resize.Version != L.next.Version || m.Resize.Epoch != epoch)
	}
	// No copy before every current partition is marked: a server that has
	// not noticed the resize must not write a copied partition alone. (A
	// start or a restart cut short may have left marks out.)
	if err := d.retry(ctx, func() error { return d.spaces.Mark(ctx, L.cur, StateResizing) }); err != nil {
		return err
	}
	r.copied.Store(int64(from))
	n := L.cur.Partitions
	for p := from; p < n; p++ {
		if d.spaces.SplitCommits() && superseded() {
			return nil
		}
		err := d.retry(ctx, func() error { return d.copyPartition(ctx, L, partmap.Partition(p)) })
		if err == ErrStale {
			return nil // another server finished the resize
		}
		if err != nil {
			return err
		}
		r.copied.Store(int64(p + 1))
		// Progress is recorded now and then; a crash re-copies at most the
		// partitions since, which is harmless.
		if (p+1)%16 == 0 || p+1 == n {
			copied := p + 1
			if err := d.retry(ctx, func() error {
				_, err := d.spaces.UpdateMeta(ctx, func(m *engine.Meta) error {
					if m.Resize != nil && m.Resize.Version == L.next.Version && m.Resize.Epoch == epoch {
						m.Resize.Copied = max(m.Resize.Copied, copied)
					}
					return nil
				})
				return err
			}); err != nil {
				return err
			}
		}
	}
	switch err := d.retry(ctx, func() error { return d.switchTo(ctx, L, epoch) }); err {
	case nil:
	case ErrStale:
		return nil // another server switched, and drops the old version
	default:
		return err
	}
	r.lastErr.Store(nil)
	// The old version is deleted in the background, once the operations
	// still running on it (a long export, say) have finished; the mover is
	// done, so that another resize may start meanwhile.
	r.retiredMu.Lock()
	retired := append(r.retired, L)
	r.retired = nil
	r.drops.Add(1)
	r.retiredMu.Unlock()
	go func() {
		defer r.drops.Done()
		for _, old := range retired {
			for old.active.Load() > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		}
		d.retry(ctx, func() error { return d.finishRetired(ctx) })
	}()
	return nil
}

// copyPartition copies current partition p into the next version, under
// p's lock and the locks of the next partitions its profiles go to.
func (d *Directory) copyPartition(ctx context.Context, L *layout, p partmap.Partition) error {
	for {
		// Read without the lock to learn which next partitions to lock.
		items, err := partitionItems(ctx, L.backend, p)
		if err != nil {
			return err
		}
		lock := []partmap.Partition{p}
		for _, it := range items {
			q, _ := L.mirror(it.Email)
			lock = append(lock, q)
		}
		slices.Sort(lock)
		lock = slices.Compact(lock)
		err = L.engine.Invoke(ctx, engine.Invocation{Load: lock, Lock: lock}, func(tx *engine.Tx) error {
			if d.layout.Load() != L {
				return ErrStale
			}
			items, err := partitionItems(ctx, L.backend, p)
			if err != nil {
				return err
			}
			for _, it := range items {
				q, _ := L.mirror(it.Email)
				if _, ok := slices.BinarySearch(lock, q); !ok {
					return errRetarget
				}
				if err := tx.Put(q, it.Email, it.Record); err != nil {
					return err
				}
			}
			return nil
		})
		if err != errRetarget {
			return err
		}
	}
}

// partitionItems reads every profile of current partition p.
func partitionItems(ctx context.Context, b Backend, p partmap.Partition) ([]Item, error) {
	var out []Item
	after := &Position{Partition: p}
	for {
		items, err := b.Scan(ctx, after, p+1, exportPage)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			if it.Partition != p {
				return out, nil
			}
			out = append(out, it)
		}
		if len(items) < exportPage {
			return out, nil
		}
		after = &items[len(items)-1].Position
	}
}

// switchTo makes L's next version the current one, under the whole-map
// lock of both versions, so that no write is half on either side of it.
func (d *Directory) switchTo(ctx context.Context, L *layout, epoch int) error {
	hold, err := L.backend.HoldAll(ctx, wholeMapWait)
	if err != nil {
		return err
	}
	// Not cut short by Close: the metadata, the marks and the swap go
	// together. A crash in between is finished by the next open (Retired).
	ctx = context.WithoutCancel(ctx)
	next := *L.next
	_, err = d.spaces.UpdateMeta(ctx, func(m *engine.Meta) error {
		if m.Resize == nil && m.Version == next.Version {
			return nil // switched already, by a try whose marking failed
		}
		if m.Resize == nil || m.Resize.Version != next.Version || m.Resize.Epoch != epoch {
			return ErrStale // another server started the copy over, or switched
		}
		m.Partitions, m.Version, m.Resize = next.Partitions, next.Version, nil
		m.Retired = append(m.Retired, engine.Retired{Version: L.cur.Version, Partitions: L.cur.Partitions})
		return nil
	})
	if err == ErrStale {
		hold.Release()
		d.reload(L)
		return err
	}
	if err != nil {
		hold.Release()
		return err
	}
	// Other servers' reads and writes of the old version now fail as stale
	// until they reload the layout. The lock stays held until the marks are
	// all set, however long Redis takes to come back.
	for d.spaces.Mark(ctx, L.cur, StateRetired) != nil {
		time.Sleep(resizeRetry)
	}
	d.layout.Store(d.newLayout(next, nil))
	return hold.Release()
}

// finishRetired completes the removal of the versions resizes replaced, as
// recorded in the metadata: it marks each retired (again) and deletes it,
// then forgets it. Opening a store calls it, so that a crash in
// the middle of a switch or a drop leaves nothing behind.
func (d *Directory) finishRetired(ctx context.Context) error {
	L := d.layout.Load()
	meta, err := L.backend.Meta(ctx)
	if err != nil {
		return err
	}
	for _, r := range meta.Retired {
		old := Space{Version: r.Version, Partitions: r.Partitions}
		if err := d.spaces.Mark(ctx, old, StateRetired); err != nil {
			return err
		}
		if err := d.spaces.Drop(ctx, old); err != nil {
			return err
		}
		if _, err := d.spaces.UpdateMeta(ctx, func(m *engine.Meta) error {
			m.Retired = slices.DeleteFunc(m.Retired, func(x engine.Retired) bool { return x.Version == old.Version })
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

func (d *Directory) ResizeStatus(ctx context.Context) (partmap.ResizeStatus, error) {
	if err := d.checkStarted(ctx); err != nil {
		return partmap.ResizeStatus{}, err
	}
	L := d.layout.Load()
	st := partmap.ResizeStatus{Partitions: L.cur.Partitions, Version: L.cur.Version}
	if msg := d.resizer.lastErr.Load(); msg != nil {
		st.LastError = *msg
	}
	if L.next == nil {
		return st, nil
	}
	st.Running, st.To = true, L.next.Partitions
	st.Copied = int(d.resizer.copied.Load())
	if meta, err := L.backend.Meta(ctx); err == nil && meta.Resize != nil && meta.Resize.Copied > st.Copied {
		st.Copied = meta.Resize.Copied // another server's mover is ahead
	}
	return st, nil
}
