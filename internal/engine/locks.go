package engine

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/partmap/partmap"
)

// LocalLocks is a Locker for a store that one process owns, such as Pebble,
// whose directory lock keeps every other process out. Each partition lock is
// a one-slot channel, so a wait can be bounded by a timer and a context and
// waiters are served roughly in arrival order.
type LocalLocks struct {
	slots []chan struct{}
}

var _ Locker = (*LocalLocks)(nil)

// NewLocalLocks returns a lock table for n partitions.
func NewLocalLocks(n int) *LocalLocks {
	l := &LocalLocks{slots: make([]chan struct{}, n)}
	for i := range l.slots {
		l.slots[i] = make(chan struct{}, 1)
	}
	return l
}

// Lock acquires the partitions in ascending order, waiting at most wait in
// all. On failure it holds nothing and returns partmap.ELOCKCONFLICT, or the
// context's error.
func (l *LocalLocks) Lock(ctx context.Context, partitions []partmap.Partition, wait time.Duration) (Lease, error) {
	ps := slices.Clone(partitions)
	if len(ps) > 1 {
		slices.Sort(ps)
		ps = slices.Compact(ps)
	}
	lease := &localLease{locks: l, held: ps[:0:0]}
	var deadline <-chan time.Time
	for _, p := range ps {
		slot := l.slots[p]
		select {
		case slot <- struct{}{}:
			lease.held = append(lease.held, p)
			continue
		default:
		}
		if wait <= 0 {
			lease.Release()
			return nil, conflict(p)
		}
		if deadline == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case slot <- struct{}{}:
			lease.held = append(lease.held, p)
		case <-deadline:
			lease.Release()
			return nil, conflict(p)
		case <-ctx.Done():
			lease.Release()
			return nil, ctx.Err()
		}
	}
	return lease, nil
}

func conflict(p partmap.Partition) error {
	return partmap.Errorf(partmap.ELOCKCONFLICT, "%s is locked by another writer; retry the request", p)
}

type localLease struct {
	locks *LocalLocks
	once  sync.Once
	held  []partmap.Partition
}

func (l *localLease) Release() {
	l.once.Do(func() {
		for _, p := range l.held {
			<-l.locks.slots[p]
		}
	})
}
