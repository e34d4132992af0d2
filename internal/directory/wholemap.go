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

// wholeMap is the whole-map lock an operator holds, if any.
type wholeMap struct {
	mu    sync.Mutex
	lease string
	hold  engine.Lease
	timer *time.Timer
	// until is when the lock held now releases itself; nil when none is
	// held. Writers that meet the lock read it without taking mu, which
	// LockWholeMap holds while it waits for them.
	until atomic.Pointer[time.Time]
}

// holdAll takes the whole-map lock of sv: every partition of every
// generation it serves, kept until released.
func (d *Directory) holdAll(ctx context.Context, sv *serving) (engine.Lease, error) {
	return d.engine.Hold(ctx, sv.all(), wholeMapWait)
}

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
	if until := w.until.Load(); until != nil {
		return partmap.WholeMapLock{}, &partmap.Error{Code: partmap.ELOCKCONFLICT, RetryAfter: time.Until(*until),
			Message: fmt.Sprintf("the whole-map lock is already held, until %s", until.UTC().Format(time.RFC3339))}
	}
	var hold engine.Lease
	for {
		sv := d.serving.Load()
		var err error
		if hold, err = d.holdAll(ctx, sv); err != nil {
			return partmap.WholeMapLock{}, err
		}
		// Held on the layout the metadata describes, or another server has
		// resized under this one: catch up and lock the layout in use.
		meta, err := d.readMeta(ctx)
		if err != nil {
			hold.Release()
			return partmap.WholeMapLock{}, err
		}
		if sv.same(meta) {
			break
		}
		hold.Release()
		if err := d.reload(sv); err != nil {
			return partmap.WholeMapLock{}, err
		}
	}
	raw := make([]byte, 16)
	rand.Read(raw)
	expires := time.Now().Add(dur)
	w.lease, w.hold = hex.EncodeToString(raw), hold
	w.until.Store(&expires)
	lease := w.lease
	w.timer = time.AfterFunc(dur, func() { d.UnlockWholeMap(context.Background(), lease) })
	return partmap.WholeMapLock{Lease: w.lease, Expires: expires}, nil
}

func (d *Directory) UnlockWholeMap(_ context.Context, lease string) error {
	w := &d.wholeMap
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.hold == nil || lease != w.lease {
		return partmap.Errorf(partmap.ENOTFOUND, "no whole-map lock is held under that lease (it may have expired, or be held through another server)")
	}
	w.timer.Stop()
	w.until.Store(nil)
	err := w.hold.Release()
	w.hold, w.lease, w.timer = nil, "", nil
	return err
}

// explainConflict turns a lock conflict met while this server holds the
// whole-map lock into what it is: the whole map is locked, until a known
// time, which is also when a retry can succeed.
func (d *Directory) explainConflict(err error) error {
	if !errors.Is(err, partmap.ErrLockConflict) {
		return err
	}
	until := d.wholeMap.until.Load()
	if until == nil {
		return err
	}
	return &partmap.Error{Code: partmap.ELOCKCONFLICT, RetryAfter: time.Until(*until),
		Message: fmt.Sprintf("the whole map is locked for maintenance until %s; retry after that", until.UTC().Format(time.RFC3339))}
}
