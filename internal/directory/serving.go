package directory

import (
	"context"
	"sync/atomic"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

// serving is what the directory serves from: the current layout, and the
// next one while a resize copies into it. It never changes; a resize swaps
// in a new one.
type serving struct {
	cur  engine.Layout
	next *engine.Layout
	// fence is every invocation's Fence: during a resize, writes to the
	// current generation expect it marked as resizing.
	fence map[int]engine.Stage
	// active counts operations running on this serving, so that a
	// generation is dropped only once nothing reads it any more.
	active atomic.Int64
}

func newServing(cur engine.Layout, next *engine.Layout) *serving {
	sv := &serving{cur: cur, next: next}
	if next != nil {
		sv.fence = map[int]engine.Stage{cur.Generation: engine.StageResizing}
	}
	return sv
}

// same reports whether sv serves the layouts m describes.
func (sv *serving) same(m metadata) bool {
	next := m.next()
	return sv.cur == m.current() && (next == nil) == (sv.next == nil) && (next == nil || *next == *sv.next)
}

// part is email's partition in the current generation.
func (sv *serving) part(email string) engine.Part {
	return engine.Part{Generation: sv.cur.Generation, Partition: partmap.PartitionOf(email, sv.cur.Partitions)}
}

// mirror is email's partition in the next generation, during a resize.
func (sv *serving) mirror(email string) (engine.Part, bool) {
	if sv.next == nil {
		return engine.Part{}, false
	}
	return engine.Part{Generation: sv.next.Generation, Partition: partmap.PartitionOf(email, sv.next.Partitions)}, true
}

// invocation loads and locks parts, with sv's fence.
func (sv *serving) invocation(parts ...engine.Part) engine.Invocation {
	return engine.Invocation{Load: parts, Lock: parts, Fence: sv.fence}
}

// layouts are the layouts sv serves: the current one, then, during a
// resize, the next.
func (sv *serving) layouts() []engine.Layout {
	if sv.next == nil {
		return []engine.Layout{sv.cur}
	}
	return []engine.Layout{sv.cur, *sv.next}
}

// all is every partition of every generation sv serves: the whole-map lock.
func (sv *serving) all() []engine.Part {
	var out []engine.Part
	for _, l := range sv.layouts() {
		for p := range partmap.Partition(l.Partitions) {
			out = append(out, engine.Part{Generation: l.Generation, Partition: p})
		}
	}
	return out
}

// acquire returns the current serving, counted as in use until released.
func (d *Directory) acquire() *serving {
	for {
		sv := d.serving.Load()
		sv.active.Add(1)
		if d.serving.Load() == sv {
			return sv
		}
		sv.active.Add(-1)
	}
}

func (sv *serving) release() { sv.active.Add(-1) }

// read runs a read on the current serving, and again if a resize switched
// layouts meanwhile: the old generation stops receiving writes at the
// switch, so what was read there may be stale.
func (d *Directory) read(fn func(sv *serving) error) error {
	for {
		sv := d.acquire()
		err := fn(sv)
		sv.release()
		if err == engine.ErrStale {
			if err := d.reload(sv); err != nil {
				return err
			}
			continue
		}
		if d.serving.Load() == sv {
			return err
		}
	}
}

// reload replaces sv, found stale, with what the metadata describes now:
// another server started or finished a resize.
func (d *Directory) reload(sv *serving) error {
	if d.serving.Load() != sv {
		return nil // replaced already
	}
	meta, err := d.readMeta(context.Background())
	if err != nil {
		return err
	}
	if sv.same(meta) {
		return partmap.Errorf(partmap.EUNAVAILABLE, "the store's partition marks disagree with its metadata (layout generation %d); retry", meta.Generation)
	}
	d.serve(sv, newServing(meta.current(), meta.next()))
	return nil
}

// serve makes sv the serving, unless old is not nil and no longer is, and
// hands the layouts served down to the backend.
func (d *Directory) serve(old, sv *serving) {
	if old == nil {
		d.serving.Store(sv)
	} else if !d.serving.CompareAndSwap(old, sv) {
		return
	}
	d.serveMu.Lock()
	defer d.serveMu.Unlock()
	d.engine.Serve(d.serving.Load().layouts()) // the newest, whoever swapped last
}

// staged is a single-profile write: on the current generation and, during
// a resize, the same on the next, in the same atomic commit.
type staged struct {
	tx     *engine.Tx
	p, q   engine.Part
	mirror bool
	email  string
}

func (sv *serving) staged(email string) staged {
	st := staged{p: sv.part(email), email: email}
	st.q, st.mirror = sv.mirror(email)
	return st
}

// parts are the partitions the write locks.
func (st staged) parts() []engine.Part {
	if st.mirror {
		return []engine.Part{st.p, st.q}
	}
	return []engine.Part{st.p}
}

// get returns the profile's record as the invocation sees it at now, nil
// when there is none or it has expired.
func (st staged) get(now int64) (*partmap.Record, error) {
	rec, ok, err := st.tx.Get(st.p, st.email)
	if err != nil || !ok {
		return nil, err
	}
	return live(&rec, now), nil
}

// Put writes rec as change; the change feed hears of it once, from the
// current generation: the next one's copy is a mirror.
func (st staged) Put(rec partmap.Record, change partmap.OpKind) error {
	if err := st.tx.Put(st.p, st.email, rec, change); err != nil || !st.mirror {
		return err
	}
	return st.tx.Put(st.q, st.email, rec, engine.Move)
}

func (st staged) Delete(change partmap.OpKind) error {
	if err := st.tx.Delete(st.p, st.email, change); err != nil || !st.mirror {
		return err
	}
	return st.tx.Delete(st.q, st.email, engine.Move)
}
