package engine

import (
	"context"
	"sync"
	"time"

	"github.com/partmap/partmap"
)

// localLocks are the engine's in-process partition locks, which every
// invocation takes before the backend's (if it shares its store with other
// processes). Each lock is a one-slot channel, so a wait can be bounded by a
// timer and a context, and waiters are served roughly in arrival order.
// Channels are made on first use, so a map of a million partitions costs
// only what its writers touch.
type localLocks struct {
	slots sync.Map // Part → chan struct{}
}

func (l *localLocks) slot(p Part) chan struct{} {
	if c, ok := l.slots.Load(p); ok {
		return c.(chan struct{})
	}
	c, _ := l.slots.LoadOrStore(p, make(chan struct{}, 1))
	return c.(chan struct{})
}

// lock acquires parts, sorted and without repeats, in order, waiting at most
// wait in all. On failure it holds nothing and returns partmap.ELOCKCONFLICT,
// or the context's error. release frees them.
func (l *localLocks) lock(ctx context.Context, parts []Part, wait time.Duration) (release func(), err error) {
	held := make([]chan struct{}, 0, len(parts))
	release = func() {
		for _, c := range held {
			<-c
		}
		held = nil
	}
	var deadline <-chan time.Time
	for _, p := range parts {
		slot := l.slot(p)
		select {
		case slot <- struct{}{}:
			held = append(held, slot)
			continue
		default:
		}
		if wait <= 0 {
			release()
			return nil, conflict(p.Partition)
		}
		if deadline == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case slot <- struct{}{}:
			held = append(held, slot)
		case <-deadline:
			release()
			return nil, conflict(p.Partition)
		case <-ctx.Done():
			release()
			return nil, ctx.Err()
		}
	}
	return release, nil
}

// forget drops the locks of a generation that nobody uses any more.
func (l *localLocks) forget(generation int) {
	l.slots.Range(func(k, _ any) bool {
		if k.(Part).Generation == generation {
			l.slots.Delete(k)
		}
		return true
	})
}

func conflict(p partmap.Partition) error {
	return partmap.Errorf(partmap.ELOCKCONFLICT, "%s is locked by another writer; retry the request", p)
}
