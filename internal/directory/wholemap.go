package directory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

// wholeMapWait is how long taking the whole-map lock waits for busy
// partitions: writers hold one for a moment, so this is generous.
const wholeMapWait = 10 * time.Second

// wholeMap is the whole-map lock an operator holds, if any.
type wholeMap struct {
	mu      sync.Mutex
	lease   string
	expires time.Time
	hold    Hold
	timer   *time.Timer
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
	if w.hold != nil {
		return partmap.WholeMapLock{}, partmap.Errorf(partmap.ELOCKCONFLICT, "the whole-map lock is already held, until %s", w.expires.UTC().Format(time.RFC3339))
	}
	var hold Hold
	for {
		L := d.layout.Load()
		var err error
		if hold, err = L.backend.HoldAll(ctx, wholeMapWait); err != nil {
			return partmap.WholeMapLock{}, err
		}
		// Held on the layout the metadata describes, or another server has
		// resized under this one: catch up and lock the layout in use.
		meta, err := L.backend.Meta(ctx)
		if err != nil {
			hold.Release()
			return partmap.WholeMapLock{}, err
		}
		if meta.Version == L.cur.Version && (meta.Resize == nil) == (L.next == nil) {
			break
		}
		hold.Release()
		if err := d.reload(L); err != nil {
			return partmap.WholeMapLock{}, err
		}
	}
	raw := make([]byte, 16)
	rand.Read(raw)
	w.lease, w.hold, w.expires = hex.EncodeToString(raw), hold, time.Now().Add(dur)
	lease := w.lease
	w.timer = time.AfterFunc(dur, func() { d.UnlockWholeMap(context.Background(), lease) })
	return partmap.WholeMapLock{Lease: w.lease, Expires: w.expires}, nil
}

func (d *Directory) UnlockWholeMap(_ context.Context, lease string) error {
	w := &d.wholeMap
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.hold == nil || lease != w.lease {
		return partmap.Errorf(partmap.ENOTFOUND, "no whole-map lock is held under that lease (it may have expired, or be held through another server)")
	}
	w.timer.Stop()
	err := w.hold.Release()
	w.hold, w.lease, w.timer = nil, "", nil
	return err
}

// HoldLocal takes every partition lock of an in-process lock table, for
// backends whose locks live in this process and never expire.
func HoldLocal(ctx context.Context, locks engine.Locker, n int, wait time.Duration) (Hold, error) {
	all := make([]partmap.Partition, n)
	for i := range all {
		all[i] = partmap.Partition(i)
	}
	lease, err := locks.Lock(ctx, all, wait)
	if err != nil {
		return nil, err
	}
	return localHold{lease}, nil
}

type localHold struct{ lease engine.Lease }

func (h localHold) Release() error { h.lease.Release(); return nil }
