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

// A resize rehashes every profile into a new layout generation with another
// partition count, while the directory keeps serving:
//
//  1. Under the whole-map lock, the metadata records the resize and the
//     directory swaps in a serving of both generations. From then on every
//     write goes to both, in one commit: the current generation (which
//     keeps serving reads, listings and searches) and the next.
//  2. A mover copies the current generation partition by partition, each
//     under its lock and the locks of the next partitions its profiles go
//     to, and records its progress, so that a resize interrupted by a crash
//     resumes where it was. Writes make the next generation's copy of a
//     profile equal to the current's, and so does the copy, so when the
//     last partition is copied the next generation is complete.
//  3. Under the whole-map lock of both generations, the metadata switches
//     to the next generation and the directory swaps in a serving of it
//     alone.
//  4. Once nothing reads the old generation any more, it is dropped.

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
	retired   []*serving // servings over the generation being replaced
}

// moverRun is one mover goroutine, for one resize.
type moverRun struct {
	serving *serving
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
}

func (m *moverRun) finished() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// copyChunk is how many profiles one invocation of a resize's copy moves,
// and copyBatch how many records of the next generation it reads at a time.
const (
	copyChunk = 5000
	copyBatch = 500
)

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
	sv := d.serving.Load()
	switch {
	case sv.next != nil && sv.next.Partitions != partitions:
		return partmap.ResizeStatus{}, partmap.Errorf(partmap.ECONFLICT,
			"a resize from %d to %d partitions is in progress; let it finish first", sv.cur.Partitions, sv.next.Partitions)
	case sv.next != nil:
		d.startMover(sv) // resumes it here if no mover runs
		return d.ResizeStatus(ctx)
	case partitions == sv.cur.Partitions:
		return partmap.ResizeStatus{}, partmap.Errorf(partmap.EINVALID, "the directory already has %d partitions", partitions)
	}
	hold, err := d.holdAll(ctx, sv)
	if err != nil {
		return partmap.ResizeStatus{}, d.explainConflict(err)
	}
	// From here on the request's cancellation must not cut the start in
	// half: the metadata and the marks go together.
	ctx = context.WithoutCancel(ctx)
	meta, err := d.updateMeta(ctx, func(m *metadata) error {
		if err := searchWorkPending(*m); err != nil {
			return err
		}
		if m.Resize != nil || m.Generation != sv.cur.Generation {
			return engine.ErrStale
		}
		m.Resize = &resizeState{Partitions: partitions, Generation: m.Generation + 1}
		return nil
	})
	if err != nil {
		hold.Release()
		if err == engine.ErrStale {
			// Another server resized meanwhile, or its last resize is still
			// being cleaned up: catch up, and let the caller ask again.
			d.reload(sv)
			return partmap.ResizeStatus{}, partmap.Errorf(partmap.ECONFLICT, "another server changed the layout meanwhile; ask again")
		}
		return partmap.ResizeStatus{}, err
	}
	// Other servers' writes to the current generation now fail as stale
	// until they reload the layout and write both generations. Should
	// marking fail here, the mover marks again before it copies anything.
	d.engine.Mark(ctx, sv.cur, engine.StageResizing)
	next := newServing(sv.cur, meta.next())
	d.serve(nil, next)
	r.retiredMu.Lock()
	r.retired = append(r.retired, sv)
	r.retiredMu.Unlock()
	r.copied.Store(0)
	if err := hold.Release(); err != nil {
		// Lost before the swap was visible to other servers' writes: the
		// mover's copies fix what they wrote to the current generation alone.
		r.setErr(err)
	}
	d.startMover(next)
	return d.ResizeStatus(ctx)
}

// resumeResize starts the mover if the metadata records a resize in
// progress, as after a crash, once it has finished the removal of the
// generations resizes replaced. Open calls it.
//
// With CommitPerPartition the copy starts over, a precaution from before
// commits of several partitions were atomic, when a crash could leave a
// profile's generations apart: under the whole-map lock, the next
// generation is emptied, and a new epoch tells any other server's mover to
// stop.
func (d *Directory) resumeResize() error {
	r := &d.resizer
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A switch or a drop cut short: mark the old generation retired before
	// serving, then drop it.
	if err := d.finishRetired(ctx); err != nil {
		return fmt.Errorf("finishing the removal of the layout a resize replaced: %w", err)
	}
	sv := d.serving.Load()
	if sv.next == nil {
		return nil
	}
	if d.perPart {
		err := d.retry(ctx, func() error { return d.restartCopy(ctx, sv) })
		if err == engine.ErrStale {
			return nil // another server finished it meanwhile: the next call sees
		}
		if err != nil {
			return fmt.Errorf("resuming the resize to %d partitions: %w", sv.next.Partitions, err)
		}
	}
	d.startMover(sv)
	return nil
}

func (d *Directory) restartCopy(ctx context.Context, sv *serving) error {
	hold, err := d.holdAll(ctx, sv)
	if err != nil {
		return err
	}
	defer hold.Release()
	if err := d.engine.Drop(ctx, *sv.next); err != nil {
		return err
	}
	_, err = d.updateMeta(ctx, func(m *metadata) error {
		if m.Resize == nil || m.Resize.Generation != sv.next.Generation {
			return engine.ErrStale
		}
		m.Resize.Copied = 0
		m.Resize.Epoch++
		return nil
	})
	return err
}

// startMover runs the mover on sv unless one runs on it; r.mu is held.
func (d *Directory) startMover(sv *serving) {
	r := &d.resizer
	if r.closed {
		return
	}
	if r.run != nil && !r.run.finished() {
		if r.run.serving == sv {
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
	run := &moverRun{serving: sv, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	r.run = run
	go func() {
		defer close(run.done)
		if err := d.move(ctx, sv); err != nil && ctx.Err() == nil {
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
// removal of an old generation (a later open finishes it). A whole-map lock
// an operator holds stays held, in the store, until released or over.
func (d *Directory) Close() {
	d.closeSearch()
	d.sweeper.halt() // and waits for its pass to end
	d.trimmer.halt()
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
	// A whole-map lock this server holds stays held: it is the store's
	// (see restoreWholeMap). Only its timer goes.
	w := &d.wholeMap
	w.mu.Lock()
	if w.timer != nil {
		w.timer.Stop()
	}
	w.mu.Unlock()
}

// retry runs fn until it succeeds or ctx ends, backing off after failures.
// ErrStale ends it too: another server has moved the layout on.
func (d *Directory) retry(ctx context.Context, fn func() error) error {
	backoff := 10 * time.Millisecond
	for {
		err := fn()
		if err == nil || err == engine.ErrStale || ctx.Err() != nil {
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

func (d *Directory) move(ctx context.Context, sv *serving) error {
	r := &d.resizer
	meta, err := d.readMeta(ctx)
	if err != nil {
		return err
	}
	from, epoch := 0, 0
	if meta.Resize != nil && meta.Resize.Generation == sv.next.Generation {
		from, epoch = meta.Resize.Copied, meta.Resize.Epoch
	}
	// superseded reports whether another server has started the copy over
	// (or finished the resize): this mover then stops.
	superseded := func() bool {
		m, err := d.readMeta(ctx)
		return err == nil && (m.Resize == nil || m.Resize.Generation != sv.next.Generation || m.Resize.Epoch != epoch)
	}
	// No copy before every current partition is marked: a server that has
	// not noticed the resize must not write a copied partition alone. (A
	// start or a restart cut short may have left marks out.)
	if err := d.retry(ctx, func() error { return d.engine.Mark(ctx, sv.cur, engine.StageResizing) }); err != nil {
		return err
	}
	r.copied.Store(int64(from))
	n := sv.cur.Partitions
	for p := from; p < n; p++ {
		if d.perPart && superseded() {
			return nil
		}
		err := d.retry(ctx, func() error { return d.copyPartition(ctx, sv, partmap.Partition(p)) })
		if err == engine.ErrStale {
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
				_, err := d.updateMeta(ctx, func(m *metadata) error {
					if m.Resize != nil && m.Resize.Generation == sv.next.Generation && m.Resize.Epoch == epoch {
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
	switch err := d.retry(ctx, func() error { return d.switchTo(ctx, sv, epoch) }); err {
	case nil:
	case engine.ErrStale:
		return nil // another server switched, and drops the old generation
	default:
		return err
	}
	// The old generation is dropped in the background, once the operations
	// still running on it (a long export, say) have finished; the mover is
	// done, so that another resize may start meanwhile.
	r.retiredMu.Lock()
	retired := append(r.retired, sv)
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

// copyPartition copies current partition p into the next generation, a
// slice of copyChunk profiles at a time, each under p's lock and the locks
// of the next partitions its profiles go to. Slicing is safe because every
// write meanwhile goes to both generations: a profile written between two
// slices is in the next generation already, whichever slice it is in. It
// keeps each commit short, however big the partition (a Redis script
// blocks the server while it runs).
func (d *Directory) copyPartition(ctx context.Context, sv *serving, p partmap.Partition) error {
	part := engine.Part{Generation: sv.cur.Generation, Partition: p}
	after := ""
	for {
		n, last, err := d.copySlice(ctx, sv, part, after)
		if err != nil || n < copyChunk {
			return err
		}
		after = last
	}
}

// copySlice copies up to copyChunk profiles of part after the email after,
// and returns how many and the last.
func (d *Directory) copySlice(ctx context.Context, sv *serving, part engine.Part, after string) (int, string, error) {
	// Which next partitions the slice's profiles go to, read without the lock.
	var items []engine.Item
	if err := d.engine.Invoke(ctx, engine.Invocation{Load: []engine.Part{part}}, func(tx *engine.Tx) (err error) {
		items, err = tx.ScanPage(part, after, copyChunk)
		return err
	}); err != nil {
		return 0, "", err
	}
	for {
		lock := []engine.Part{part}
		for _, it := range items {
			q, _ := sv.mirror(it.Email)
			lock = append(lock, q)
		}
		slices.SortFunc(lock, engine.Part.Compare)
		lock = slices.Compact(lock)
		err := d.engine.Invoke(engine.Bulk(ctx), sv.invocation(lock...), func(tx *engine.Tx) error {
			if d.serving.Load() != sv {
				return engine.ErrStale
			}
			var err error
			if items, err = tx.ScanPage(part, after, copyChunk); err != nil {
				return err
			}
			// The copies' records in the next generation (a write during the
			// resize may have made one) are read in batches, not one round
			// trip each.
			byNext := map[engine.Part][]string{}
			for _, it := range items {
				q, _ := sv.mirror(it.Email)
				if _, ok := slices.BinarySearchFunc(lock, q, engine.Part.Compare); !ok {
					return errRetarget
				}
				byNext[q] = append(byNext[q], it.Email)
			}
			for q, emails := range byNext {
				for batch := range slices.Chunk(emails, copyBatch) {
					if err := tx.Prefetch(q, batch); err != nil {
						return err
					}
				}
			}
			for _, it := range items {
				q, _ := sv.mirror(it.Email)
				if err := tx.Copy(q, it.Email, it.Record); err != nil { // no change to feed, and the commit time kept
					return err
				}
			}
			return nil
		})
		if err == errRetarget {
			continue
		}
		if err != nil || len(items) == 0 {
			return 0, "", err
		}
		return len(items), items[len(items)-1].Email, nil
	}
}

// switchTo makes sv's next generation the current one, under the whole-map
// lock of both generations, so that no write is half on either side of it.
func (d *Directory) switchTo(ctx context.Context, sv *serving, epoch int) error {
	hold, err := d.holdAll(ctx, sv)
	if err != nil {
		return err
	}
	// Not cut short by Close: the metadata, the marks and the swap go
	// together. A crash in between is finished by the next open (Retired).
	ctx = context.WithoutCancel(ctx)
	next := *sv.next
	_, err = d.updateMeta(ctx, func(m *metadata) error {
		if m.Resize == nil && m.Generation == next.Generation {
			return nil // switched already, by a try whose marking failed
		}
		if m.Resize == nil || m.Resize.Generation != next.Generation || m.Resize.Epoch != epoch {
			return engine.ErrStale // another server started the copy over, or switched
		}
		m.Partitions, m.Generation, m.Resize = next.Partitions, next.Generation, nil
		m.Retired = append(m.Retired, retiredLayout{Generation: sv.cur.Generation, Partitions: sv.cur.Partitions})
		return nil
	})
	if err == engine.ErrStale {
		hold.Release()
		d.reload(sv)
		return err
	}
	if err != nil {
		hold.Release()
		return err
	}
	// Other servers' reads and writes of the old generation now fail as
	// stale until they reload the layout. The lock stays held until the
	// marks are all set, however long Redis takes to come back.
	for d.engine.Mark(ctx, sv.cur, engine.StageRetired) != nil {
		time.Sleep(resizeRetry)
	}
	// Before the new layout shows: a status that says the resize is over
	// shows none of the failures its mover retried.
	d.resizer.lastErr.Store(nil)
	d.serve(nil, newServing(next, nil))
	return hold.Release()
}

// finishRetired completes the removal of the generations resizes replaced,
// as recorded in the metadata: it marks each retired (again) and drops it,
// then forgets it. Opening a directory calls it, so that a crash in the
// middle of a switch or a drop leaves nothing behind.
func (d *Directory) finishRetired(ctx context.Context) error {
	meta, err := d.readMeta(ctx)
	if err != nil {
		return err
	}
	for _, r := range meta.Retired {
		old := engine.Layout{Generation: r.Generation, Partitions: r.Partitions}
		if err := d.engine.Mark(ctx, old, engine.StageRetired); err != nil {
			return err
		}
		if err := d.engine.Drop(ctx, old); err != nil {
			return err
		}
		if _, err := d.updateMeta(ctx, func(m *metadata) error {
			m.Retired = slices.DeleteFunc(m.Retired, func(x retiredLayout) bool { return x.Generation == old.Generation })
			return nil
		}); err != nil {
			return err
		}
		d.engine.Forget(old.Generation)
	}
	return nil
}

func (d *Directory) ResizeStatus(ctx context.Context) (partmap.ResizeStatus, error) {
	if err := d.checkStarted(ctx); err != nil {
		return partmap.ResizeStatus{}, err
	}
	sv := d.serving.Load()
	st := partmap.ResizeStatus{Partitions: sv.cur.Partitions, Generation: sv.cur.Generation}
	if msg := d.resizer.lastErr.Load(); msg != nil {
		st.LastError = *msg
	}
	if sv.next == nil {
		return st, nil
	}
	st.Running, st.To = true, sv.next.Partitions
	st.Copied = int(d.resizer.copied.Load())
	if meta, err := d.readMeta(ctx); err == nil && meta.Resize != nil && meta.Resize.Copied > st.Copied {
		st.Copied = meta.Resize.Copied // another server's mover is ahead
	}
	return st, nil
}
