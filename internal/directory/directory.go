// Package directory implements partmap.Store on top of the invocation engine:
// the customer-profile semantics are written once here, and every backend
// (Pebble, and later others) supplies only storage, locks and metadata.
package directory

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

// DefaultLockWait is how long a write waits for its partition lock before it
// fails with a lock conflict. See DESIGN.md for why it is not zero.
const DefaultLockWait = 50 * time.Millisecond

// Backend is what a storage technology provides.
type Backend interface {
	engine.Backend
	// Meta reads the persisted directory metadata.
	Meta(ctx context.Context) (engine.Meta, error)
	// Start persists started=true; startedNow is false if it already was.
	Start(ctx context.Context) (startedNow bool, err error)
	// Scan returns up to limit profiles after a position (nil: from the
	// start) and before partition end, in partition and then email order,
	// from one consistent view.
	Scan(ctx context.Context, after *Position, end partmap.Partition, limit int) ([]Item, error)
	// Counts returns the profile count of every partition that exists.
	Counts(ctx context.Context) ([]partmap.PartitionCount, error)
	// Snapshot freezes the whole directory for an export.
	Snapshot(ctx context.Context) (Snapshot, error)
	// Search is Scan restricted to the profiles whose index entries match
	// every condition (at least one is given).
	Search(ctx context.Context, where []IndexMatch, after *Position, limit int) ([]Item, error)
	// IndexEntries returns every index entry stored in partition p.
	IndexEntries(ctx context.Context, p partmap.Partition) ([]IndexEntry, error)
	// Count returns partition p's stored profile count.
	Count(ctx context.Context, p partmap.Partition) (int64, error)
	// HoldAll takes the whole-map lock (every partition's), waiting up to
	// wait for busy ones, and holds it until released, however long.
	HoldAll(ctx context.Context, wait time.Duration) (Hold, error)
}

// Hold is the whole-map lock, held.
type Hold interface {
	// Release lets writers in again. An error means the lock was lost while
	// held (on Redis: a failover, or a stall past the TTL).
	Release() error
}

// Snapshot is a frozen view of every profile.
type Snapshot interface {
	// Scan is Backend.Scan, over the frozen view.
	Scan(ctx context.Context, after *Position, end partmap.Partition, limit int) ([]Item, error)
	// Close releases the view. An error means it did not stay frozen, so
	// what was read from it is not a consistent snapshot.
	Close() error
}

// Options tune a Directory. The zero value means the defaults.
type Options struct {
	LockWait time.Duration   // 0 means fail fast; use DefaultLockWait for the default
	Limits   *partmap.Limits // nil means partmap.DefaultLimits
	Indexes  []string        // the indexed fields, from the metadata (see ChooseIndexes)
	// Spaces and Meta make a directory that can resize: New then builds its
	// backend from Spaces, as Meta describes it, and ignores its arguments.
	Spaces Spaces
	Meta   *engine.Meta
	// BulkPartitions is how many partitions one invocation of a bulk write
	// covers; 0 means 1. Where an invocation over several partitions
	// commits as one batch, as on Pebble, a larger number spreads its cost
	// over more profiles. Where it commits partition by partition, as on
	// Redis, 1 keeps the partitions' round trips in parallel.
	BulkPartitions int
}

// Directory is the customer directory over one backend.
type Directory struct {
	layout   atomic.Pointer[layout]
	spaces   Spaces
	lockWait time.Duration
	limits   partmap.Limits
	indexes  []string
	metrics  *storeMetrics
	resizer  resizer
	bulkSize int // partitions per bulk invocation

	wholeMap wholeMap // held by an operator, for bulk maintenance

	// started only ever goes from false to true, so a cached true is safe.
	started atomic.Bool
	// cursorSecret caches the metadata's cursor key, which never changes.
	cursorSecret atomic.Pointer[[]byte]
}

var _ partmap.Store = (*Directory)(nil)

// New returns a directory of n partitions over backend, or, with
// opts.Spaces, one that can resize, in the layout opts.Meta describes.
func New(backend Backend, n int, opts Options) *Directory {
	d := &Directory{
		spaces:   opts.Spaces,
		lockWait: opts.LockWait,
		limits:   partmap.DefaultLimits,
		indexes:  opts.Indexes,
		metrics:  newStoreMetrics(),
		bulkSize: max(1, opts.BulkPartitions),
	}
	if opts.Limits != nil {
		d.limits = *opts.Limits
	}
	cur, next := Space{Partitions: n}, (*Space)(nil)
	if d.spaces == nil {
		d.spaces = fixedSpace{backend}
	} else {
		cur = Space{Version: opts.Meta.Version, Partitions: opts.Meta.Partitions}
		if r := opts.Meta.Resize; r != nil {
			next = &Space{Version: r.Version, Partitions: r.Partitions}
		}
	}
	d.layout.Store(d.newLayout(cur, next))
	return d
}

// fixedSpace is the one backend of a directory that cannot resize.
type fixedSpace struct{ b Backend }

func (f fixedSpace) Backend(...Space) Backend { return f.b }
func (f fixedSpace) Drop(context.Context, Space) error {
	return partmap.Errorf(partmap.EINVALID, "this store cannot resize")
}
func (f fixedSpace) Mark(context.Context, Space, string) error { return nil }
func (f fixedSpace) SplitCommits() bool                        { return false }
func (f fixedSpace) UpdateMeta(context.Context, func(*engine.Meta) error) (engine.Meta, error) {
	return engine.Meta{}, partmap.Errorf(partmap.EINVALID, "this store cannot resize")
}

// Engine exposes the current layout's invocation engine, for maintenance
// and for tests.
func (d *Directory) Engine() *engine.Engine { return d.layout.Load().engine }

// backend is the current layout's backend, for what any version answers:
// the metadata.
func (d *Directory) backend() Backend { return d.layout.Load().backend }

// Limits returns the limits the directory enforces.
func (d *Directory) Limits() partmap.Limits { return d.limits }

func (d *Directory) Start(ctx context.Context) (bool, error) {
	now, err := d.backend().Start(ctx)
	if err == nil {
		d.started.Store(true)
	}
	return now, err
}

func (d *Directory) checkStarted(ctx context.Context) error {
	if d.started.Load() {
		return nil
	}
	meta, err := d.backend().Meta(ctx)
	if err != nil {
		return err
	}
	if !meta.Started {
		return partmap.Errorf(partmap.ENOTSTARTED,
			"the directory is not started; POST /patterns/hash-partitioned-attribute-map/start (or run `partmap start`) once first")
	}
	d.started.Store(true)
	return nil
}

// locate canonicalises email and checks that the directory is started.
func (d *Directory) locate(ctx context.Context, email string) (string, error) {
	canonical, _, err := partmap.Locate(email, partmap.DefaultPartitions)
	if err != nil {
		return "", err
	}
	return canonical, d.checkStarted(ctx)
}

func notFound(email string) error {
	if strings.Contains(email, " ") {
		return partmap.Errorf(partmap.ENOTFOUND, "no profile for %q (in a URL query, + means a space: write %%2B for a plus sign)", email)
	}
	return partmap.Errorf(partmap.ENOTFOUND, "no profile for %s", email)
}

func (d *Directory) FindProfile(ctx context.Context, email string) (partmap.Record, error) {
	email, err := d.locate(ctx, email)
	if err != nil {
		return partmap.Record{}, err
	}
	var rec partmap.Record
	err = d.read(func(L *layout) error {
		p := L.partition(email)
		return L.engine.Invoke(ctx, engine.Invocation{Load: []partmap.Partition{p}}, func(tx *engine.Tx) error {
			var ok bool
			var err error
			rec, ok, err = tx.Get(p, email)
			if err == nil && !ok {
				err = notFound(email)
			}
			return err
		})
	})
	return rec, err
}

// prepare validates a whole profile and returns a copy with its canonical
// email.
func (d *Directory) prepare(profile partmap.Profile) (partmap.Profile, error) {
	raw, ok := profile[partmap.FieldEmail]
	if !ok {
		return nil, &partmap.Error{Code: partmap.EINVALIDEMAIL, Field: partmap.FieldEmail, Message: "emailAddress is required"}
	}
	// Text first, as a client's encoder does: bytes that are not UTF-8 are
	// an encoding error before they are a bad address.
	if err := d.limits.CheckField(partmap.FieldEmail, raw); err != nil {
		return nil, err
	}
	email, _, err := partmap.Locate(raw, partmap.DefaultPartitions)
	if err != nil {
		return nil, err
	}
	profile = profile.Clone()
	profile[partmap.FieldEmail] = email
	if err := d.limits.CheckProfile(profile); err != nil {
		return nil, err
	}
	return profile, nil
}

func (d *Directory) UpsertProfile(ctx context.Context, profile partmap.Profile, cond partmap.Condition) (partmap.Record, bool, error) {
	profile, err := d.prepare(profile)
	if err != nil {
		return partmap.Record{}, false, err
	}
	email := profile.Email()
	if err := d.checkStarted(ctx); err != nil {
		return partmap.Record{}, false, err
	}
	var rec partmap.Record
	var created bool
	err = d.guarded(ctx, email, cond, func(st staged, cur *partmap.Record) error {
		var prev partmap.Version
		if cur != nil {
			prev = cur.Version
		}
		rec = partmap.Record{Profile: profile, Version: nextVersion(prev)}
		created = cur == nil
		return st.Put(rec)
	})
	return rec, created, err
}

// guarded runs fn under the lock of email's partition, with its current
// record (nil when there is none), once cond holds for that record. Every
// single-profile write goes through here. During a resize it also locks
// the profile's partition in the next version, and fn's write goes to both.
func (d *Directory) guarded(ctx context.Context, email string, cond partmap.Condition,
	fn func(st staged, cur *partmap.Record) error) error {
	for {
		L := d.acquire()
		st := staged{p: L.partition(email), email: email}
		inv := lockOne(st.p)
		if st.q, st.mirror = L.mirror(email); st.mirror {
			inv = engine.Invocation{Load: []partmap.Partition{st.p, st.q}, Lock: []partmap.Partition{st.p, st.q}}
		}
		err := L.engine.Invoke(ctx, inv, func(tx *engine.Tx) error {
			if d.layout.Load() != L {
				return ErrStale
			}
			rec, exists, err := tx.Get(st.p, email)
			if err != nil {
				return err
			}
			var cur *partmap.Record
			if exists {
				cur = &rec
			}
			if err := cond.Check(cur); err != nil {
				return err
			}
			st.tx = tx
			return fn(st, cur)
		})
		L.release()
		if err != ErrStale {
			return err
		}
		if err := d.reload(L); err != nil {
			return err
		}
	}
}

// lockOne is the invocation of every single-profile write: it loads and
// locks exactly the profile's partition.
func lockOne(p partmap.Partition) engine.Invocation {
	ps := []partmap.Partition{p}
	return engine.Invocation{Load: ps, Lock: ps}
}

// nextVersion draws a random non-zero version that differs from the last.
// Random versions need no persisted counter and never repeat in practice,
// even across deletion and re-creation of a profile.
func nextVersion(prev partmap.Version) partmap.Version {
	for {
		if v := partmap.Version(rand.Uint64()); v != 0 && v != prev {
			return v
		}
	}
}
