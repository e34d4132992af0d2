package directory

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

// Space is one version of the directory's layout: a partition count, in a
// key space of its own.
type Space struct {
	Version    int
	Partitions int
}

// SpaceOf maps partition number p of a backend over several versions,
// which numbers each version's partitions on after the previous one's, to
// the index of its version in spaces and its number there. The index is
// len(spaces) when p is beyond them all.
func SpaceOf[S interface{ Size() int }](spaces []S, p partmap.Partition) (int, partmap.Partition) {
	for i := range spaces {
		n := spaces[i].Size()
		if int(p) < n {
			return i, p
		}
		p -= partmap.Partition(n)
	}
	return len(spaces), p
}

// Spaces is what a storage technology provides for resizing: backends over
// layout versions, and the metadata that records which is current.
type Spaces interface {
	// Backend returns a backend over the given versions: the current one,
	// or during a resize the current and then the next, whose partitions
	// are numbered on after the current's. Reads, listings, searches,
	// counts and snapshots see the first; Get, Commit and Lock take either.
	Backend(versions ...Space) Backend
	// Drop deletes everything a version stores. It is no longer used.
	Drop(ctx context.Context, v Space) error
	// UpdateMeta applies fn to the stored metadata and stores the result;
	// concurrent updates are serialised.
	UpdateMeta(ctx context.Context, fn func(*engine.Meta) error) (engine.Meta, error)
	// Mark records on every partition of version v that a resize is
	// replacing it (StateResizing) or has replaced it (StateRetired), for
	// stores shared by several servers; a store served by one process may
	// do nothing.
	Mark(ctx context.Context, v Space, state string) error
	// SplitCommits reports whether a write to both versions commits in two
	// steps (Redis: one script per slot), so that a crash between them can
	// leave the versions apart; a resize resumed after a crash then copies
	// everything again.
	SplitCommits() bool
}

// Partition states that Spaces.Mark records.
const (
	StateResizing = "resizing"
	StateRetired  = "retired"
)

// layout is what the directory serves from: the current version, and the
// next one while a resize copies into it. It never changes; a resize swaps
// in a new one.
type layout struct {
	backend Backend
	engine  *engine.Engine
	cur     Space
	next    *Space
	// active counts operations running on this layout, so that a version
	// is dropped only once nothing reads it any more.
	active atomic.Int64
}

// ErrStale aborts an invocation that was planned on a layout a resize has
// since replaced: the directory's own (it took its locks after the swap),
// or, said by a backend, another server's (Redis marks the partitions of a
// version being replaced). It runs again on the current layout.
var ErrStale = errors.New("directory: the layout changed; run again")

func (d *Directory) newLayout(cur Space, next *Space) *layout {
	L := &layout{cur: cur, next: next}
	n := cur.Partitions
	if next != nil {
		L.backend = d.spaces.Backend(cur, *next)
		n += next.Partitions
	} else {
		L.backend = d.spaces.Backend(cur)
	}
	L.engine = engine.New(L.backend, n, d.lockWait)
	L.engine.SetHooks(d.metrics.hooks())
	return L
}

// partition is email's partition in the current version.
func (L *layout) partition(email string) partmap.Partition {
	return partmap.PartitionOf(email, L.cur.Partitions)
}

// mirror is email's partition in the next version, numbered after the
// current's, during a resize.
func (L *layout) mirror(email string) (partmap.Partition, bool) {
	if L.next == nil {
		return 0, false
	}
	return partmap.Partition(L.cur.Partitions) + partmap.PartitionOf(email, L.next.Partitions), true
}

// acquire returns the current layout, counted as in use until released.
func (d *Directory) acquire() *layout {
	for {
		L := d.layout.Load()
		L.active.Add(1)
		if d.layout.Load() == L {
			return L
		}
		L.active.Add(-1)
	}
}

func (L *layout) release() { L.active.Add(-1) }

// read runs a read on the current layout, and again if a resize switched
// layouts meanwhile: the old version stops receiving writes at the switch,
// so what was read there may be stale.
func (d *Directory) read(fn func(L *layout) error) error {
	for {
		L := d.acquire()
		err := fn(L)
		L.release()
		if err == ErrStale {
			if err := d.reload(L); err != nil {
				return err
			}
			continue
		}
		if d.layout.Load() == L {
			return err
		}
	}
}

// reload replaces L, which a backend found stale, with the layout the
// metadata describes now: another server started or finished a resize.
func (d *Directory) reload(L *layout) error {
	if d.layout.Load() != L {
		return nil // replaced already
	}
	ctx := context.Background()
	meta, err := L.backend.Meta(ctx)
	if err != nil {
		return err
	}
	cur := Space{Version: meta.Version, Partitions: meta.Partitions}
	var next *Space
	if r := meta.Resize; r != nil {
		next = &Space{Version: r.Version, Partitions: r.Partitions}
	}
	if cur == L.cur && (next == nil) == (L.next == nil) && (next == nil || *next == *L.next) {
		return partmap.Errorf(partmap.EUNAVAILABLE, "the store's partition marks disagree with its metadata (layout version %d); retry", meta.Version)
	}
	d.layout.CompareAndSwap(L, d.newLayout(cur, next))
	return nil
}

// staged stages a single-profile write on the current version and, during
// a resize, the same on the next one, in the same atomic commit.
type staged struct {
	tx     *engine.Tx
	p, q   partmap.Partition
	mirror bool
	email  string
}

func (s staged) Put(rec partmap.Record) error {
	if err := s.tx.Put(s.p, s.email, rec); err != nil || !s.mirror {
		return err
	}
	return s.tx.Put(s.q, s.email, rec)
}

func (s staged) Delete() error {
	if err := s.tx.Delete(s.p, s.email); err != nil || !s.mirror {
		return err
	}
	return s.tx.Delete(s.q, s.email)
}
