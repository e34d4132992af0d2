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
	// start), in partition and then email order, from one consistent view.
	Scan(ctx context.Context, after *Position, limit int) ([]Item, error)
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
	Scan(ctx context.Context, after *Position, limit int) ([]Item, error)
	// Close releases the view. An error means it did not stay frozen, so
	// what was read from it is not a consistent snapshot.
	Close() error
}

// Options tune a Directory. The zero value means the defaults.
type Options struct {
	LockWait time.Duration   // 0 means fail fast; use DefaultLockWait for the default
	Limits   *partmap.Limits // nil means partmap.DefaultLimits
	Indexes  []string        // the indexed fields, from the metadata (see ChooseIndexes)
}

// Directory is the customer directory over one backend.
type Directory struct {
	backend Backend
	engine  *engine.Engine
	limits  partmap.Limits
	n       int
	indexes []string
	metrics *storeMetrics

	wholeMap wholeMap // held by an operator, for bulk maintenance

	// started only ever goes from false to true, so a cached true is safe.
	started atomic.Bool
	// cursorSecret caches the metadata's cursor key, which never changes.
	cursorSecret atomic.Pointer[[]byte]
}

var _ partmap.Store = (*Directory)(nil)

// New returns a directory of n partitions over backend.
func New(backend Backend, n int, opts Options) *Directory {
	d := &Directory{
		backend: backend,
		engine:  engine.New(backend, n, opts.LockWait),
		limits:  partmap.DefaultLimits,
		n:       n,
		indexes: opts.Indexes,
		metrics: newStoreMetrics(),
	}
	d.engine.SetHooks(d.metrics.hooks())
	if opts.Limits != nil {
		d.limits = *opts.Limits
	}
	return d
}

// Engine exposes the invocation engine, for maintenance and for tests.
func (d *Directory) Engine() *engine.Engine { return d.engine }

// Limits returns the limits the directory enforces.
func (d *Directory) Limits() partmap.Limits { return d.limits }

func (d *Directory) Start(ctx context.Context) (bool, error) {
	now, err := d.backend.Start(ctx)
	if err == nil {
		d.started.Store(true)
	}
	return now, err
}

func (d *Directory) checkStarted(ctx context.Context) error {
	if d.started.Load() {
		return nil
	}
	meta, err := d.backend.Meta(ctx)
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
func (d *Directory) locate(ctx context.Context, email string) (string, partmap.Partition, error) {
	canonical, p, err := partmap.Locate(email, d.n)
	if err != nil {
		return "", 0, err
	}
	return canonical, p, d.checkStarted(ctx)
}

func notFound(email string) error {
	if strings.Contains(email, " ") {
		return partmap.Errorf(partmap.ENOTFOUND, "no profile for %q (in a URL query, + means a space: write %%2B for a plus sign)", email)
	}
	return partmap.Errorf(partmap.ENOTFOUND, "no profile for %s", email)
}

func (d *Directory) FindProfile(ctx context.Context, email string) (partmap.Record, error) {
	email, p, err := d.locate(ctx, email)
	if err != nil {
		return partmap.Record{}, err
	}
	var rec partmap.Record
	err = d.engine.Invoke(ctx, engine.Invocation{Load: []partmap.Partition{p}}, func(tx *engine.Tx) error {
		var ok bool
		rec, ok, err = tx.Get(p, email)
		if err == nil && !ok {
			err = notFound(email)
		}
		return err
	})
	return rec, err
}

// prepare validates a whole profile and returns a copy with its canonical
// email, and its partition.
func (d *Directory) prepare(profile partmap.Profile) (partmap.Profile, partmap.Partition, error) {
	raw, ok := profile[partmap.FieldEmail]
	if !ok {
		return nil, 0, &partmap.Error{Code: partmap.EINVALIDEMAIL, Field: partmap.FieldEmail, Message: "emailAddress is required"}
	}
	// Text first, as a client's encoder does: bytes that are not UTF-8 are
	// an encoding error before they are a bad address.
	if err := d.limits.CheckField(partmap.FieldEmail, raw); err != nil {
		return nil, 0, err
	}
	email, p, err := partmap.Locate(raw, d.n)
	if err != nil {
		return nil, 0, err
	}
	profile = profile.Clone()
	profile[partmap.FieldEmail] = email
	if err := d.limits.CheckProfile(profile); err != nil {
		return nil, 0, err
	}
	return profile, p, nil
}

func (d *Directory) UpsertProfile(ctx context.Context, profile partmap.Profile, cond partmap.Condition) (partmap.Record, bool, error) {
	profile, p, err := d.prepare(profile)
	if err != nil {
		return partmap.Record{}, false, err
	}
	email := profile.Email()
	if err := d.checkStarted(ctx); err != nil {
		return partmap.Record{}, false, err
	}
	var rec partmap.Record
	var created bool
	err = d.guarded(ctx, p, email, cond, func(tx *engine.Tx, cur *partmap.Record) error {
		var prev partmap.Version
		if cur != nil {
			prev = cur.Version
		}
		rec = partmap.Record{Profile: profile, Version: nextVersion(prev)}
		created = cur == nil
		return tx.Put(p, email, rec)
	})
	return rec, created, err
}

// guarded runs fn under the lock of email's partition, with its current
// record (nil when there is none), once cond holds for that record. Every
// single-profile write goes through here.
func (d *Directory) guarded(ctx context.Context, p partmap.Partition, email string, cond partmap.Condition,
	fn func(tx *engine.Tx, cur *partmap.Record) error) error {
	return d.engine.Invoke(ctx, lockOne(p), func(tx *engine.Tx) error {
		rec, exists, err := tx.Get(p, email)
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
		return fn(tx, cur)
	})
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
