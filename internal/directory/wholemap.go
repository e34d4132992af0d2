package directory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

// wholeMapWait is how long taking the whole-map lock waits for busy
// partitions: writers hold one for a moment, so this is generous.
const wholeMapWait = 10 * time.Second

// The whole-map lock is kept in the store: its lease and end are in the
// metadata (metadata.WholeMap), and its partition locks are named by the
// lease (engine.Named), so that on a store several servers share every
// server sees it, honours it and can release it with the lease, even once
// the server that took it has died. A server that opens a directory whose
// metadata records one holds it again until its end.

// wholeMapLease is the whole-map lock recorded in the metadata.
type wholeMapLease struct {
	Lease   string    `json:"lease"`
	Expires time.Time `json:"expires"`
}

// held reports whether w is a lock that has not expired.
func (w *wholeMapLease) held() bool { return w != nil && time.Now().Before(w.Expires) }

// wholeMap is this server's side of the whole-map lock.
type wholeMap struct {
	mu    sync.Mutex
	lease string       // the lease this server holds the lock under, if any
	hold  engine.Lease // its locks
	timer *time.Timer  // releases them at the end
	// seen is the lock the metadata recorded when last read for a lock
	// conflict, and when that was: writers that meet the lock read it
	// without taking mu, which LockWholeMap holds while it waits for them.
	seen atomic.Pointer[seenLease]
}

type seenLease struct {
	lock *wholeMapLease // nil: none
	at   time.Time
}

// holdAll takes the whole-map lock of sv: every partition of every
// generation it serves, kept until released.
func (d *Directory) holdAll(ctx context.Context, sv *serving) (engine.Lease, error) {
	return d.engine.Hold(ctx, sv.all(), wholeMapWait)
}

func wholeMapHeld(l *wholeMapLease) error {
	return &partmap.Error{Code: partmap.ELOCKCONFLICT, RetryAfter: time.Until(l.Expires),
		Message: fmt.Sprintf("the whole-map lock is already held, until %s", l.Expires.UTC().Format(time.RFC3339))}
}

// errLayoutMoved: the whole-map lock was taken on a layout that another
// server's resize has replaced.
var errLayoutMoved = errors.New("directory: the layout moved under the whole-map lock")

func (d *Directory) LockWholeMap(ctx context.Context, dur time.Duration) (partmap.WholeMapLock, error) {
	if dur <= 0 || dur > partmap.MaxWholeMapLock {
		return partmap.WholeMapLock{}, partmap.Errorf(partmap.EINVALID, "hold the whole-map lock for more than 0 and at most %v, not %v", partmap.MaxWholeMapLock, dur)
	}
	if err := d.checkStarted(ctx); err != nil {
		return partmap.WholeMapLock{}, err
	}
	w := &d.wholeMap
	w.mu.Lock()
	defer w.mu.Unlock()
	meta, err := d.readMeta(ctx)
	if err != nil {
		return partmap.WholeMapLock{}, err
	}
	if meta.WholeMap.held() {
		return partmap.WholeMapLock{}, wholeMapHeld(meta.WholeMap)
	}
	raw := make([]byte, 16)
	rand.Read(raw)
	lock := &wholeMapLease{Lease: hex.EncodeToString(raw), Expires: time.Now().Add(dur)}
	named := engine.Named{Lease: lock.Lease, Until: lock.Expires}
	var hold engine.Lease
	for {
		sv := d.serving.Load()
		if hold, err = d.engine.HoldNamed(ctx, sv.all(), wholeMapWait, named); err != nil {
			return partmap.WholeMapLock{}, err
		}
		// Recorded on the layout the metadata describes, or another server
		// has resized under this one: catch up and lock the layout in use.
		_, err = d.updateMeta(ctx, func(m *metadata) error {
			if !sv.same(*m) {
				return errLayoutMoved
			}
			if m.WholeMap.held() {
				return wholeMapHeld(m.WholeMap)
			}
			m.WholeMap = lock
			return nil
		})
		if err == nil {
			break
		}
		hold.Release()
		if err != errLayoutMoved {
			return partmap.WholeMapLock{}, err
		}
		if err := d.reload(sv); err != nil {
			return partmap.WholeMapLock{}, err
		}
	}
	d.keepWholeMap(lock, hold)
	return partmap.WholeMapLock{Lease: lock.Lease, Expires: lock.Expires}, nil
}

// keepWholeMap makes this server the holder of lock's locks, until its
// end; w.mu is held.
func (d *Directory) keepWholeMap(lock *wholeMapLease, hold engine.Lease) {
	w := &d.wholeMap
	w.lease, w.hold = lock.Lease, hold
	w.seen.Store(&seenLease{lock: lock, at: time.Now()})
	w.timer = time.AfterFunc(time.Until(lock.Expires), func() { d.UnlockWholeMap(context.Background(), lock.Lease) })
}

// restoreWholeMap holds again a whole-map lock the metadata records, as
// when the server that took it restarted: on a store one process owns,
// its locks died with that process. Open calls it.
func (d *Directory) restoreWholeMap(ctx context.Context) error {
	meta, err := d.readMeta(ctx)
	if err != nil || !meta.WholeMap.held() {
		return err
	}
	lock := meta.WholeMap
	hold, err := d.engine.HoldNamed(ctx, d.serving.Load().all(), wholeMapWait, engine.Named{Lease: lock.Lease, Until: lock.Expires})
	if partmap.ErrorCode(err) == partmap.ENOTFOUND {
		return nil // it ended meanwhile
	}
	if err != nil {
		return err
	}
	// Released by another server meanwhile: let it go.
	if meta, err = d.readMeta(ctx); err != nil || meta.WholeMap == nil || meta.WholeMap.Lease != lock.Lease {
		hold.Release()
		return err
	}
	w := &d.wholeMap
	w.mu.Lock()
	defer w.mu.Unlock()
	d.keepWholeMap(lock, hold)
	return nil
}

func (d *Directory) UnlockWholeMap(ctx context.Context, lease string) error {
	w := &d.wholeMap
	w.mu.Lock()
	defer w.mu.Unlock()
	meta, err := d.readMeta(ctx)
	if err != nil {
		return err
	}
	lock := meta.WholeMap
	recorded := lease != "" && lock.held() && lock.Lease == lease
	hold := w.hold
	if hold != nil && lease == w.lease {
		w.timer.Stop()
		w.hold, w.lease, w.timer = nil, "", nil
	} else if hold = nil; recorded {
		// Held through another server, which may have died: take its locks
		// over with the lease, to release them.
		if hold, err = d.engine.HoldNamed(ctx, d.serving.Load().all(), wholeMapWait, engine.Named{Lease: lock.Lease, Until: lock.Expires}); err != nil {
			return err
		}
	}
	if hold != nil {
		err = hold.Release()
	}
	if lock != nil && lock.Lease == lease {
		if _, merr := d.updateMeta(ctx, func(m *metadata) error {
			if m.WholeMap != nil && m.WholeMap.Lease == lease {
				m.WholeMap = nil
			}
			return nil
		}); merr != nil && err == nil {
			err = merr
		}
	}
	w.seen.Store(&seenLease{at: time.Now()})
	if !recorded {
		// Expired, or released through another server: this one's hold,
		// if any, was only a leftover.
		return partmap.Errorf(partmap.ENOTFOUND, "no whole-map lock is held under that lease (it may have expired, or been released through another server)")
	}
	return err
}

// explainConflict turns a lock conflict met while the whole-map lock is
// held into what it is: the whole map is locked, until a known time, which
// is also when a retry can succeed. What the metadata says is read again
// at most every tenth of a second.
func (d *Directory) explainConflict(err error) error {
	if !errors.Is(err, partmap.ErrLockConflict) {
		return err
	}
	w := &d.wholeMap
	seen := w.seen.Load()
	if seen == nil || time.Since(seen.at) > 100*time.Millisecond {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		meta, merr := d.readMeta(ctx)
		cancel()
		if merr != nil {
			return err
		}
		seen = &seenLease{lock: meta.WholeMap, at: time.Now()}
		w.seen.Store(seen)
	}
	if !seen.lock.held() {
		return err
	}
	until := seen.lock.Expires
	return &partmap.Error{Code: partmap.ELOCKCONFLICT, RetryAfter: time.Until(until),
		Message: fmt.Sprintf("the whole map is locked for maintenance until %s; retry after that", until.UTC().Format(time.RFC3339))}
}
