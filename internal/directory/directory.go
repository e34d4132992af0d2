// Package directory implements partmap.Store once, over any backend: the
// customer-profile semantics live here, and a storage technology supplies
// only the engine.Backend contract (internal/engine/backend.go).
//
// The directory decides; the backend stores. The directory resolves which
// layout generation a profile lives in, builds every write (the engine adds
// the index entries it changes) and hands the backend finished writes
// through the engine, its one way to the backend; the backend never calls
// back. DESIGN.md shows how to add a backend.
package directory

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

// Options configure Open: what the store was asked for, and what its
// backend says of itself.
type Options struct {
	partmap.DirectoryOptions
	// CommitPerPartition makes bulk writes and the sweeper commit one
	// partition per invocation, for a backend whose commit of several
	// partitions takes many round trips (Redis: a script per slot, made
	// atomic by its transaction protocol), so that the partitions' round
	// trips run in parallel and each write is checked; otherwise an
	// invocation covers bulkPartitions partitions, in one batch. A resize
	// resumed after a crash then also copies everything again, a
	// precaution from before such commits were atomic.
	CommitPerPartition bool
	// CheckedWrites says the backend's Commit takes writes to one
	// partition without a lease and checks them itself
	// (engine.Options.CheckedWrites): a single-partition write then takes
	// no lock in the store.
	CheckedWrites bool
	// FeedPoll is how often a long-poll of the feed looks for changes; 0
	// means 20 ms (a backend that other servers write too says more).
	FeedPoll time.Duration
	// IndexPoll is how often a directory over a shared store reads the
	// metadata for search indexes other servers changed; 0 means
	// defaultIndexPoll, and a negative one never (a server alone on its
	// store). Builds and cleanings wait four of these first.
	IndexPoll time.Duration
}

// bulkPartitions is how many partitions one invocation of a bulk write
// covers where it commits as one batch. At one partition each, an import
// on Pebble spent about a fifth of its time on the fixed cost of a commit.
// More partitions per invocation hold more locks at once, though only until
// the batch is applied, never across its fsync.
const bulkPartitions = 16

// Directory is the customer directory over one backend.
type Directory struct {
	engine    *engine.Engine // the one way to the backend
	serving   atomic.Pointer[serving]
	limits    partmap.Limits
	indexes   []string
	perPart   bool   // CommitPerPartition
	bulkSize  int    // partitions per bulk invocation
	cursors   []byte // the metadata's cursor key, which never changes
	metrics   *storeMetrics
	clock     func() time.Time
	sweeper   *sweeper
	trimmer   *trimmer
	feedPoll  time.Duration
	indexPoll time.Duration
	resizer   resizer
	wholeMap  wholeMap   // held by an operator, for bulk maintenance
	serveMu   sync.Mutex // the backend hears of layouts in the order they serve

	searcher engine.Searcher // nil: the backend keeps no search indexes
	searches atomic.Pointer[searchSetBox]
	search   searchAdmin

	// started only ever goes from false to true, so a cached true is safe.
	started atomic.Bool
}

var _ partmap.Store = (*Directory)(nil)

// Inspect checks, without writing anything, that the directory b holds,
// if any, is one Open would serve with opts. exists is false when b holds
// no metadata.
func Inspect(ctx context.Context, b engine.Backend, opts Options) (exists bool, err error) {
	raw, err := b.Meta(ctx, nil)
	if err != nil || raw == nil {
		return false, err
	}
	m, err := parseMeta(raw, opts.Partitions)
	if err == nil {
		_, err = chooseIndexes(opts.Indexes, false, m.Indexes)
	}
	return true, err
}

// Open serves the directory backend b holds, creating its metadata when
// there is none. It refuses metadata that is not partmap's, is from a newer
// partmap, or has another partition count or other indexes than opts asks.
// A resize interrupted by a crash resumes, and the removal of a layout one
// replaced is finished, before Open returns.
func Open(ctx context.Context, b engine.Backend, opts Options) (*Directory, error) {
	partitions := cmp.Or(opts.Partitions, partmap.DefaultPartitions)
	created := false
	raw, err := b.Meta(ctx, func(old []byte) ([]byte, error) {
		if old != nil {
			return old, nil
		}
		indexes, err := chooseIndexes(opts.Indexes, true, nil)
		if err != nil {
			return nil, err
		}
		created = true
		return json.Marshal(newMeta(partitions, indexes))
	})
	if err != nil {
		return nil, err
	}
	meta, err := parseMeta(raw, opts.Partitions)
	if err != nil {
		return nil, err
	}
	indexes, err := chooseIndexes(opts.Indexes, created, meta.Indexes)
	if err != nil {
		return nil, err
	}
	d := &Directory{
		engine:    engine.New(b, engine.Options{LockWait: opts.LockWait, Indexes: indexes, CheckedWrites: opts.CheckedWrites}),
		limits:    *cmp.Or(opts.Limits, &partmap.DefaultLimits),
		indexes:   indexes,
		perPart:   opts.CommitPerPartition,
		bulkSize:  bulkPartitions,
		cursors:   meta.CursorKey,
		metrics:   newStoreMetrics(),
		clock:     opts.Clock,
		sweeper:   newSweeperMetrics(),
		trimmer:   newTrimmer(*cmp.Or(opts.FeedRetention, &partmap.DefaultRetention)),
		feedPoll:  cmp.Or(opts.FeedPoll, defaultFeedPoll),
		indexPoll: cmp.Or(opts.IndexPoll, defaultIndexPoll),
	}
	if d.clock == nil {
		d.clock = time.Now
	}
	if d.perPart {
		d.bulkSize = 1
	}
	d.searcher, _ = b.(engine.Searcher)
	d.engine.SetHooks(d.metrics.hooks())
	d.serve(nil, newServing(meta.current(), meta.next()))
	if err := d.loadSearch(meta); err != nil {
		return nil, err
	}
	d.search.mu.Lock()
	d.startSearchWork(meta)
	d.search.mu.Unlock()
	if err := d.resumeResize(); err != nil {
		return nil, err
	}
	if err := d.restoreWholeMap(ctx); err != nil {
		return nil, fmt.Errorf("holding the whole-map lock the metadata records: %w", err)
	}
	if opts.SweepInterval >= 0 {
		d.startSweeper(cmp.Or(opts.SweepInterval, partmap.DefaultSweepInterval))
	}
	if opts.FeedTrimInterval >= 0 {
		d.startTrimmer(cmp.Or(opts.FeedTrimInterval, trimInterval))
	}
	return d, nil
}

// Engine is the directory's invocation engine, for tests that hold a
// partition's lock or invoke the engine directly.
func (d *Directory) Engine() *engine.Engine { return d.engine }

// Layout is the layout that serves reads now, for tests that address a
// partition through the engine.
func (d *Directory) Layout() engine.Layout { return d.serving.Load().cur }

func (d *Directory) Start(ctx context.Context) (bool, error) {
	now := false
	_, err := d.updateMeta(ctx, func(m *metadata) error {
		now = !m.Started
		m.Started = true
		return nil
	})
	if err != nil {
		return false, err
	}
	d.started.Store(true)
	return now, nil
}

func (d *Directory) checkStarted(ctx context.Context) error {
	if d.started.Load() {
		return nil
	}
	meta, err := d.readMeta(ctx)
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
	canonical, err := partmap.CanonicalEmail(email)
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
	var rec *partmap.Record
	err = d.read(func(sv *serving) error {
		var err error
		rec, err = d.engine.Read(ctx, sv.part(email), email)
		if rec != nil && !rec.Deadlines.IsZero() {
			rec = live(rec, d.now()) // the clock only when something can expire: this is every lookup's path
		}
		if err == nil && rec == nil {
			err = notFound(email)
		}
		return err
	})
	if err != nil {
		return partmap.Record{}, err
	}
	return *rec, nil
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
	email, err := partmap.CanonicalEmail(raw)
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

// guarded runs fn under the lock of email's partition, with its current
// record (nil when there is none), once cond holds for that record. Every
// single-profile write goes through here. During a resize it also locks
// the profile's partition in the next generation, and fn's write goes to
// both.
//
// fn may run several times for one call: again on the new layout after
// ErrStale, and, for a checked write, again after its commit found the
// record changed or the partition locked by another server (see
// engine.Invoke). Only the last run's writes commit, so whatever fn
// reports to its caller must be set by each run, never accumulated.
func (d *Directory) guarded(ctx context.Context, email string, cond partmap.Condition,
	fn func(st staged, cur *partmap.Record, now int64) error) error {
	for {
		sv := d.acquire()
		st := sv.staged(email)
		inv := sv.invocation(st.parts()...)
		inv.Records = []string{email}
		err := d.engine.Invoke(ctx, inv, func(tx *engine.Tx) error {
			if d.serving.Load() != sv {
				return engine.ErrStale
			}
			st.tx = tx
			now := d.now()
			cur, err := st.get(now)
			if err != nil {
				return err
			}
			if err := cond.Check(cur); err != nil {
				return err
			}
			return fn(st, cur, now)
		})
		sv.release()
		if err != engine.ErrStale {
			return d.explainConflict(err)
		}
		if err := d.reload(sv); err != nil {
			return err
		}
	}
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

// Indexes returns the directory's indexed fields.
func (d *Directory) Indexes() []string { return append([]string(nil), d.indexes...) }
