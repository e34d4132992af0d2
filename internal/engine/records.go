package engine

import (
	"context"
	"slices"
	"sync"
	"time"
)

// recordLocks are the in-process locks of an engine whose backend checks
// versions (Options.CheckedWrites). An invocation that declares its records
// (Invocation.Records) locks those records and shares their partition with
// other such invocations; every other invocation, and Hold, takes its
// partitions whole, excluding them. So writers of different records of one
// partition run side by side, while a whole-partition reader (the check, a
// resize's copy) or the whole-map lock still has each partition to itself.
//
// A partition taken whole waits for the record writers inside to finish,
// and new record writers queue behind it, so that a hot partition cannot
// starve it. The records a writer locks are taken before its share of the
// partition, so a writer that holds a share never waits: the writers a
// whole lock waits for always finish.
type recordLocks struct {
	mu    sync.Mutex
	parts map[Part]*partLock
}

type partLock struct {
	whole    bool // held whole
	queued   int  // whole lockers waiting
	shared   int  // record writers inside
	waiters  int  // anyone waiting on wake
	wake     chan struct{}
	recordsC map[string]chan struct{} // held records; each closed on release
}

func (l *recordLocks) part(p Part) *partLock {
	if l.parts == nil {
		l.parts = make(map[Part]*partLock)
	}
	pl := l.parts[p]
	if pl == nil {
		pl = &partLock{wake: make(chan struct{}), recordsC: make(map[string]chan struct{})}
		l.parts[p] = pl
	}
	return pl
}

// tidy forgets p's lock once nobody holds or awaits any of it; mu is held.
func (l *recordLocks) tidy(p Part, pl *partLock) {
	if !pl.whole && pl.queued == 0 && pl.shared == 0 && pl.waiters == 0 && len(pl.recordsC) == 0 {
		delete(l.parts, p)
	}
}

// signal wakes whoever waits on pl's state; mu is held.
func (pl *partLock) signal() {
	if pl.waiters > 0 {
		close(pl.wake)
		pl.wake = make(chan struct{})
	}
}

// waitFor blocks until c closes, the deadline passes or ctx ends, and
// returns whether c closed.
func waitFor(ctx context.Context, c <-chan struct{}, deadline <-chan time.Time) (bool, error) {
	select {
	case <-c:
		return true, nil
	case <-deadline:
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// lockRecords takes emails of part (sorted, without repeats) and a share
// of part, waiting at most wait in all, and returns the release. On
// failure it holds nothing and returns partmap.ELOCKCONFLICT, or the
// context's error.
func (l *recordLocks) lockRecords(ctx context.Context, part Part, emails []string, wait time.Duration) (func(), error) {
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	timer := func() <-chan time.Time {
		if t == nil {
			t = time.NewTimer(wait)
		}
		return t.C
	}
	var held []string
	fail := func(err error) (func(), error) { // with mu held
		l.unlockRecords(part, held, false)
		l.mu.Unlock()
		if err == nil {
			err = conflict(part.Partition)
		}
		return nil, err
	}
	l.mu.Lock()
	for _, e := range emails {
		for {
			pl := l.part(part)
			c, busy := pl.recordsC[e]
			if !busy {
				pl.recordsC[e] = make(chan struct{})
				held = append(held, e)
				break
			}
			l.mu.Unlock()
			if wait <= 0 {
				l.mu.Lock()
				return fail(nil)
			}
			ok, err := waitFor(ctx, c, timer())
			l.mu.Lock()
			if !ok {
				return fail(err)
			}
		}
	}
	for {
		pl := l.part(part)
		if !pl.whole && pl.queued == 0 {
			pl.shared++
			l.mu.Unlock()
			return func() {
				l.mu.Lock()
				l.unlockRecords(part, held, true)
				l.mu.Unlock()
			}, nil
		}
		if wait <= 0 {
			return fail(nil)
		}
		pl.waiters++
		c := pl.wake
		l.mu.Unlock()
		ok, err := waitFor(ctx, c, timer())
		l.mu.Lock()
		pl.waiters--
		if !ok {
			return fail(err)
		}
	}
}

// unlockRecords frees emails of part, and its share if shared; mu is held.
func (l *recordLocks) unlockRecords(part Part, emails []string, shared bool) {
	pl := l.part(part)
	for _, e := range emails {
		close(pl.recordsC[e])
		delete(pl.recordsC, e)
	}
	if shared {
		pl.shared--
		if pl.shared == 0 && pl.queued > 0 {
			pl.signal()
		}
	}
	l.tidy(part, pl)
}

// lockParts takes parts (sorted, without repeats) whole, in order, waiting
// at most wait in all, and returns the release; like localLocks.lock.
func (l *recordLocks) lockParts(ctx context.Context, parts []Part, wait time.Duration) (func(), error) {
	var deadline <-chan time.Time
	var held []Part
	release := func() {
		l.mu.Lock()
		for _, p := range held {
			pl := l.part(p)
			pl.whole = false
			pl.signal()
			l.tidy(p, pl)
		}
		l.mu.Unlock()
	}
	l.mu.Lock()
	for _, p := range parts {
		pl := l.part(p)
		if !pl.whole && pl.shared == 0 && pl.queued == 0 {
			pl.whole = true
			held = append(held, p)
			continue
		}
		if wait <= 0 {
			l.mu.Unlock()
			release()
			return nil, conflict(p.Partition)
		}
		if deadline == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			deadline = t.C
		}
		pl.queued++
		for pl.whole || pl.shared > 0 {
			pl.waiters++
			c := pl.wake
			l.mu.Unlock()
			ok, err := waitFor(ctx, c, deadline)
			l.mu.Lock()
			pl.waiters--
			if !ok {
				pl.queued--
				pl.signal() // record writers queued behind this one go on
				l.tidy(p, pl)
				l.mu.Unlock()
				release()
				if err == nil {
					err = conflict(p.Partition)
				}
				return nil, err
			}
		}
		pl.queued--
		pl.whole = true
		held = append(held, p)
	}
	l.mu.Unlock()
	return release, nil
}

// forget drops the locks of a generation that nobody uses any more.
func (l *recordLocks) forget(generation int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for p, pl := range l.parts {
		if p.Generation == generation {
			l.tidy(p, pl)
		}
	}
}

// sortedRecords returns emails sorted and without repeats, for lockRecords.
func sortedRecords(emails []string) []string {
	if len(emails) > 1 && !slices.IsSorted(emails) {
		emails = slices.Clone(emails)
		slices.Sort(emails)
	}
	return slices.Compact(slices.Clip(emails))
}
