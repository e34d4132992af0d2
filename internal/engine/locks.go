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
	mu    sync.RWMutex
	slots map[Part]chan struct{}
}

func (l *localLocks) slot(p Part) chan struct{} {
	l.mu.RLock()
	c, ok := l.slots[p]
	l.mu.RUnlock()
	if ok {
		return c
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c, ok = l.slots[p]; !ok {
		if l.slots == nil {
			l.slots = make(map[Part]chan struct{})
		}
		c = make(chan struct{}, 1)
		l.slots[p] = c
	}
	return c
}

// lock acquires parts, sorted and without repeats, in order, waiting at most
// wait in all, and returns the slots it holds, for unlock. On failure it
// holds nothing and returns partmap.ELOCKCONFLICT, or the context's error.
func (l *localLocks) lock(ctx context.Context, parts []Part, wait time.Duration) ([]chan struct{}, error) {
	held := make([]chan struct{}, 0, len(parts))
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
			unlock(held)
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
			unlock(held)
			return nil, conflict(p.Partition)
		case <-ctx.Done():
			unlock(held)
			return nil, ctx.Err()
		}
	}
	return held, nil
}

// unlock frees the slots lock took.
func unlock(held []chan struct{}) {
	for _, c := range held {
		<-c
	}
}

// forget drops the locks of a generation that nobody uses any more.
func (l *localLocks) forget(generation int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for p := range l.slots {
		if p.Generation == generation {
			delete(l.slots, p)
		}
	}
}

func conflict(p partmap.Partition) error {
	return partmap.Errorf(partmap.ELOCKCONFLICT, "%s is locked by another writer; retry the request", p)
}
