// Package pebble is partmap's embedded, durable default store, on
// github.com/cockroachdb/pebble/v2. Every acknowledged write has been
// fsync'd; concurrent commits share fsyncs through Pebble's commit pipeline.
package pebble

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/directory"
	"github.com/partmap/partmap/internal/engine"
	"github.com/partmap/partmap/internal/pebbledb"
	"github.com/partmap/partmap/internal/record"
)

// SchemaVersion is the on-disk layout this code reads and writes.
const SchemaVersion = 2 // 2 added secondary indexes; 1 has none

// DefaultCacheBytes is the block cache size: large enough to keep the hot
// records of a few million profiles, small enough for a modest server.
const DefaultCacheBytes = 64 << 20

// memTableBytes is the size of Pebble's memtables. Pebble's default, 4 MB,
// made an import of 200k profiles flush a dozen times and compact the
// output, about a fifth of the server's CPU; at 32 MB it flushes once
// (docs/PERFORMANCE.md). Pebble grows a new memtable from 256 KB, so a
// small directory does not pay for the size.
const memTableBytes = 32 << 20

// bulkPartitions is how many partitions one invocation of a bulk write
// covers. Each invocation is one batch; at one partition each, an import
// spent about a fifth of its time on the fixed cost of a commit. More
// partitions per invocation hold more locks at once, though only until the
// batch is applied, never across its fsync.
const bulkPartitions = 16

// Options configure Open. A nil *Options means the defaults.
type Options struct {
	// Partitions is the partition count the caller expects. A new directory
	// is created with it; an existing one with another count is refused.
	// 0 means partmap.DefaultPartitions for a new directory, and whatever
	// an existing one has (a resize may have changed it).
	Partitions int
	// LockWait is how long a write waits for its partition lock; a negative
	// value fails at once. 0 means directory.DefaultLockWait.
	LockWait time.Duration
	// Limits bounds profiles; nil means partmap.DefaultLimits.
	Limits *partmap.Limits
	// MinSyncInterval delays a WAL fsync until this long after the last one,
	// so that more concurrent writes share it. It raises the throughput of
	// many writers and the latency of a lone one; 0 (the default) syncs at
	// once. See docs/PERFORMANCE.md.
	MinSyncInterval time.Duration
	// CacheBytes sizes Pebble's block cache; 0 means DefaultCacheBytes.
	CacheBytes int64
	// Indexes are the fields a new directory indexes for search; nil means
	// partmap.DefaultIndexes and an empty slice none. An existing directory
	// keeps its own, and refuses a non-nil Indexes that differs.
	Indexes []string
	// FS is the filesystem; nil means the operating system's. Tests use
	// Pebble's crashable in-memory FS to drop every unsynced byte.
	FS vfs.FS
}

// Store is a customer directory in a Pebble database on local disk.
type Store struct {
	*directory.Directory
	db        *pebble.DB
	lock      *pebble.Lock
	closeOnce sync.Once
	closeErr  error
}

var (
	_ partmap.Store      = (*Store)(nil)
	_ engine.BatchGetter = (*backend)(nil)
)

// Open opens or creates the directory stored at path.
func Open(path string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	expect := o.Partitions // 0: whatever an existing directory has
	if o.Partitions == 0 {
		o.Partitions = partmap.DefaultPartitions
	}
	switch {
	case o.LockWait == 0:
		o.LockWait = directory.DefaultLockWait
	case o.LockWait < 0:
		o.LockWait = 0
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.CacheBytes == 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	fresh, err := checkDataDirectory(o.FS, path)
	if err != nil {
		return nil, err
	}
	// Taking the directory lock first tells "in use" apart from every other
	// failure to open.
	lock, err := pebble.LockDirectory(path, o.FS)
	if err != nil {
		return nil, fmt.Errorf("data directory %s is in use by another partmap process (%v)", path, err)
	}
	popts := &pebble.Options{Logger: quietLogger{}, Lock: lock, FS: o.FS, CacheSize: o.CacheBytes, MemTableSize: memTableBytes}
	if o.MinSyncInterval > 0 {
		interval := o.MinSyncInterval
		popts.WALMinSyncInterval = func() time.Duration { return interval }
	}
	// Every read is a point lookup of one record: Bloom filters let it skip
	// the sstables that cannot hold the key instead of searching them.
	for i := range popts.Levels {
		popts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	var meta engine.Meta
	if !fresh {
		// Check an existing directory read-only, so that a directory this
		// code must refuse is left exactly as it was.
		if meta, fresh, err = inspect(popts, path, expect); err != nil {
			lock.Close()
			return nil, fmt.Errorf("data directory %s: %w", path, err)
		}
	}
	db, err := pebble.Open(path, popts)
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("open data directory %s: %w", path, err)
	}
	sp := &spaces{db: db, meta: &pebbledb.Store{DB: db}, locks: map[int]*engine.LocalLocks{}}
	indexes, err := directory.ChooseIndexes(o.Indexes, fresh, meta.Indexes)
	if err != nil {
		db.Close()
		lock.Close()
		return nil, fmt.Errorf("data directory %s: %w", path, err)
	}
	if fresh {
		meta = engine.NewMeta(SchemaVersion, o.Partitions, indexes)
		if err := sp.meta.Write(meta); err != nil {
			db.Close()
			lock.Close()
			return nil, fmt.Errorf("data directory %s: %w", path, err)
		}
	}
	sp.indexes = indexes
	d := directory.New(nil, 0, directory.Options{LockWait: o.LockWait, Limits: o.Limits, Indexes: indexes, Spaces: sp, Meta: &meta,
		BulkPartitions: bulkPartitions})
	// After a crash in the middle of a resize, or of the removal of the
	// version one replaced, carry on with it.
	if err := d.ResumeResize(); err != nil {
		db.Close()
		lock.Close()
		return nil, fmt.Errorf("data directory %s: %w", path, err)
	}
	return &Store{Directory: d, db: db, lock: lock}, nil
}

// Close releases the data directory. Every acknowledged write is already
// durable, so Close has nothing to save. Calling it again does nothing.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.Directory.Close() // a resize in progress stops, to resume at the next open
		s.closeErr = errors.Join(s.db.Close(), s.lock.Close())
	})
	return s.closeErr
}

// spaces builds backends over the directory's layout versions, which all
// live in the one database.
type spaces struct {
	db      *pebble.DB
	meta    *pebbledb.Store
	indexes []string

	mu    sync.Mutex
	locks map[int]*engine.LocalLocks // by version: shared by every backend over it
}

func (s *spaces) Backend(versions ...directory.Space) directory.Backend {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := &backend{db: s.db, Store: s.meta, indexes: s.indexes}
	for _, v := range versions {
		locks, ok := s.locks[v.Version]
		if !ok {
			locks = engine.NewLocalLocks(v.Partitions)
			s.locks[v.Version] = locks
		}
		b.spaces = append(b.spaces, space{version: v.Version, n: v.Partitions, prefix: spacePrefix(v.Version), locks: locks})
	}
	return b
}

// Drop deletes a version's keys with range deletions, durably.
func (s *spaces) Drop(_ context.Context, v directory.Space) error {
	batch := s.db.NewBatch()
	defer batch.Close()
	for _, r := range spaceRanges(v.Version) {
		if err := batch.DeleteRange(r[0], r[1], nil); err != nil {
			return err
		}
	}
	s.mu.Lock()
	delete(s.locks, v.Version)
	s.mu.Unlock()
	return batch.Commit(pebble.Sync)
}

// Mark does nothing: one process serves a Pebble directory, and its layout
// is all the marking it needs.
func (s *spaces) Mark(context.Context, directory.Space, string) error { return nil }

// SplitCommits is false: a write to both versions is one batch.
func (s *spaces) SplitCommits() bool { return false }

func (s *spaces) UpdateMeta(_ context.Context, fn func(*engine.Meta) error) (engine.Meta, error) {
	return s.meta.Update(fn)
}

// space is one layout version as a backend sees it. A backend over two
// numbers the second's partitions on after the first's.
type space struct {
	version int
	n       int
	prefix  []byte
	locks   *engine.LocalLocks
}

// newBackend is a backend over version 0 of n partitions, for tests.
func newBackend(db *pebble.DB, n int) *backend {
	return &backend{db: db, Store: &pebbledb.Store{DB: db},
		spaces: []space{{n: n, locks: engine.NewLocalLocks(n)}}}
}

type backend struct {
	db              *pebble.DB
	spaces          []space  // the current version, then the next during a resize
	indexes         []string // the indexed fields, in the metadata's order
	*pebbledb.Store          // metadata: Meta and Start
}

// Size is the space's partition count.
func (s space) Size() int { return s.n }

// at maps a partition number to its space and its number there.
func (b *backend) at(p partmap.Partition) (*space, partmap.Partition) {
	i, lp := directory.SpaceOf(b.spaces, p)
	if i == len(b.spaces) {
		panic(fmt.Sprintf("pebble: partition number beyond the backend's %d spaces", len(b.spaces)))
	}
	return &b.spaces[i], lp
}

// cur is the current version, which serves reads, listings and searches.
func (b *backend) cur() *space { return &b.spaces[0] }

// Lock takes the partitions' locks space by space, in order; on a failure
// it holds nothing.
func (b *backend) Lock(ctx context.Context, ps []partmap.Partition, wait time.Duration) (engine.Lease, error) {
	if len(b.spaces) == 1 {
		return b.spaces[0].locks.Lock(ctx, ps, wait)
	}
	bySpace := make([][]partmap.Partition, len(b.spaces))
	for _, p := range ps {
		if i, lp := directory.SpaceOf(b.spaces, p); i < len(b.spaces) {
			bySpace[i] = append(bySpace[i], lp)
		}
	}
	var held multiLease
	deadline := time.Now().Add(wait)
	for i, lps := range bySpace {
		if len(lps) == 0 {
			continue
		}
		l, err := b.spaces[i].locks.Lock(ctx, lps, max(0, time.Until(deadline)))
		if err != nil {
			held.Release()
			return nil, err
		}
		held = append(held, l)
	}
	return held, nil
}

type multiLease []engine.Lease

func (m multiLease) Release() {
	for _, l := range m {
		l.Release()
	}
}

func (b *backend) HoldAll(ctx context.Context, wait time.Duration) (directory.Hold, error) {
	n := 0
	for _, sp := range b.spaces {
		n += sp.n
	}
	return directory.HoldLocal(ctx, b, n, wait)
}

// checkDataDirectory creates path if it is missing and reports whether it
// is new (missing or empty). A non-empty directory that holds no Pebble
// database is somebody else's: it is refused before anything is written.
func checkDataDirectory(fs vfs.FS, path string) (fresh bool, err error) {
	names, err := fs.List(path)
	if errors.Is(err, os.ErrNotExist) {
		if err := fs.MkdirAll(path, 0o755); err != nil {
			return false, fmt.Errorf("create data directory: %w", err)
		}
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("data directory %s: %w", path, err)
	}
	if len(names) == 0 {
		return true, nil
	}
	for _, name := range names {
		if strings.HasPrefix(name, "marker.manifest.") || name == "CURRENT" {
			return false, nil
		}
	}
	return false, fmt.Errorf("data directory %s is not empty and holds no partmap data (found %q); refusing to write to it", path, names[0])
}

// inspect opens an existing database read-only and checks its metadata
// against what this code and the caller expect.
//
// A database with no key at all is one whose first open was interrupted
// before its metadata was written: it is fresh, not foreign.
func inspect(popts *pebble.Options, path string, partitions int) (meta engine.Meta, fresh bool, err error) {
	ro := *popts
	ro.ReadOnly = true
	db, err := pebble.Open(path, &ro)
	if err != nil {
		return meta, false, fmt.Errorf("cannot be read (%w); refusing to change it", err)
	}
	defer db.Close()
	meta, ok, err := (&pebbledb.Store{DB: db}).Read()
	if err == nil && !ok {
		if empty, err := isEmpty(db); err != nil || empty {
			return meta, empty, err
		}
	}
	return meta, false, checkMeta(meta, ok, err, partitions)
}

func isEmpty(db *pebble.DB) (bool, error) {
	it, err := db.NewIter(nil)
	if err != nil {
		return false, err
	}
	defer it.Close()
	return !it.First(), it.Error()
}

func checkMeta(meta engine.Meta, ok bool, err error, partitions int) error {
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("is a Pebble database without partmap metadata; refusing to change it")
	case meta.Schema > SchemaVersion:
		return fmt.Errorf("written by a newer partmap (schema %d; this one reads %d); refusing to open it", meta.Schema, SchemaVersion)
	case meta.Schema < 1 || meta.Partitions < 1 || len(meta.CursorKey) == 0:
		return fmt.Errorf("metadata is not partmap's; refusing to open it")
	case partitions != 0 && meta.Partitions != partitions:
		return fmt.Errorf("it holds %d partitions but %d were expected; the partition count is part of the data, "+
			"and changing it needs a resize (partmap resize)", meta.Partitions, partitions)
	}
	return nil
}

func (b *backend) Get(_ context.Context, p partmap.Partition, email string) (partmap.Record, bool, error) {
	sp, lp := b.at(p)
	v, closer, err := b.db.Get(recordKey(sp.prefix, lp, email))
	if errors.Is(err, pebble.ErrNotFound) {
		return partmap.Record{}, false, nil
	}
	if err != nil {
		return partmap.Record{}, false, err
	}
	defer closer.Close()
	rec, err := record.Decode(v)
	if err != nil {
		return partmap.Record{}, false, fmt.Errorf("%s %s: %w", p, email, err)
	}
	return rec, true, nil
}

// GetBatch reads records of one partition through one iterator bounded
// to it, seeking in key order. Point lookups would each build an iterator
// and consult every level's filters; a bulk write reads a few records of
// each partition it touches, and this made its reads several times cheaper
// (docs/PERFORMANCE.md).
func (b *backend) GetBatch(_ context.Context, p partmap.Partition, emails []string) (out []*partmap.Record, err error) {
	sp, lp := b.at(p)
	it, err := b.db.NewIter(&pebble.IterOptions{
		LowerBound: recordKey(sp.prefix, lp, ""),
		UpperBound: recordKey(sp.prefix, lp+1, ""),
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := it.Close(); err == nil && cerr != nil {
			out, err = nil, cerr
		}
	}()
	order := make([]int, len(emails))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int { return strings.Compare(emails[x], emails[y]) })
	out = make([]*partmap.Record, len(emails))
	for _, i := range order {
		k := recordKey(sp.prefix, lp, emails[i])
		if !it.SeekGE(k) || !bytes.Equal(it.Key(), k) {
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, err
		}
		rec, err := record.Decode(v) // copies: v is only valid until the next seek
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", p, emails[i], err)
		}
		out[i] = &rec
	}
	return out, it.Error()
}

// Commit writes the records and keeps each partition's profile count in the
// same batch. The count is read without a snapshot: the caller holds the
// partition's lock, so nobody else changes it.
func (b *backend) Commit(_ context.Context, _ engine.Lease, writes []engine.Write) (func() error, error) {
	batch := b.db.NewBatch()
	delta := make(map[partmap.Partition]int, 1)
	for _, w := range writes {
		sp, lp := b.at(w.Partition)
		remove, add := directory.IndexChanges(b.indexes, w)
		for _, e := range remove {
			if err := batch.Delete(indexKey(sp.prefix, lp, e), nil); err != nil {
				batch.Close()
				return nil, err
			}
		}
		for _, e := range add {
			if err := batch.Set(indexKey(sp.prefix, lp, e), nil, nil); err != nil {
				batch.Close()
				return nil, err
			}
		}
		k := recordKey(sp.prefix, lp, w.Email)
		var err error
		switch {
		case w.Record != nil:
			err = batch.Set(k, record.Encode(*w.Record), nil)
			if !w.Existed {
				delta[w.Partition]++
			}
		case w.Existed:
			err = batch.Delete(k, nil)
			delta[w.Partition]--
		}
		if err != nil {
			batch.Close()
			return nil, err
		}
	}
	for p, d := range delta {
		if d == 0 {
			continue
		}
		n, err := b.count(p)
		if err != nil {
			batch.Close()
			return nil, err
		}
		sp, lp := b.at(p)
		if n += int64(d); n > 0 {
			err = batch.Set(countKey(sp.prefix, lp), binary.AppendUvarint(nil, uint64(n)), nil)
		} else {
			err = batch.Delete(countKey(sp.prefix, lp), nil) // a partition exists only while it holds a profile
		}
		if err != nil {
			batch.Close()
			return nil, err
		}
	}
	return pebbledb.Commit(b.db, batch)
}

// Count reads p's count in the current version.
func (b *backend) Count(_ context.Context, p partmap.Partition) (int64, error) { return b.count(p) }

// count reads the count of partition number p, in whichever space.
func (b *backend) count(p partmap.Partition) (int64, error) {
	sp, lp := b.at(p)
	v, closer, err := b.db.Get(countKey(sp.prefix, lp))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	n, w := binary.Uvarint(v)
	if w <= 0 {
		return 0, fmt.Errorf("%s: corrupt profile count", p)
	}
	return int64(n), nil
}

// quietLogger keeps Pebble's routine chatter out of partmap's output while
// still surfacing errors.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}
func (quietLogger) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pebble: "+format+"\n", args...)
}
func (quietLogger) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pebble: fatal: "+format+"\n", args...)
	os.Exit(1)
}

var _ io.Closer = (*Store)(nil)
