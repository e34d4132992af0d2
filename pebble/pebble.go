// Package pebble is partmap's embedded, durable default store, on
// github.com/cockroachdb/pebble/v2. Every acknowledged write has been
// fsync'd; concurrent commits share fsyncs through Pebble's commit pipeline.
//
// Open a data directory and use the result as a partmap.Store:
//
//	s, err := pebble.Open("./partmap-data", nil)
//	...
//	defer s.Close()
//	s.Start(ctx)
//	partmap.UpsertProfile(ctx, s, partmap.Profile{"emailAddress": "alice@example.com"}, partmap.Condition{})
package pebble

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/directory"
)

// DefaultCommitDelay and DefaultCommitSiblings are the fsync sharing that
// zero options mean. Right after an fsync the commits it covered still count
// as in flight until their writers wake, so fewer than about eight writers
// in step would hold syncs back for nobody; past that, a millisecond gathers
// several times the companions an fsync alone does, for less CPU per write
// (docs/PERFORMANCE.md).
const (
	DefaultCommitDelay    = time.Millisecond
	DefaultCommitSiblings = 8
)

// DefaultCacheBytes is the block cache's share for blocks: about half of a
// million profiles' tables, for a server that aims to stay under 150 MB
// (docs/PERFORMANCE.md).
const DefaultCacheBytes = 32 << 20

// DefaultRecordCacheBytes is the record cache's size: the encoded records
// of about 100,000 small profiles, which a lookup of one profile finds
// without searching Pebble's memtables and levels (docs/PERFORMANCE.md).
const DefaultRecordCacheBytes = 16 << 20

// memTableBytes is the size of Pebble's memtables. Pebble's default, 4 MB,
// made an import of 200k profiles flush a dozen times and compact the
// output; larger ones cost memory, and a lookup searches a deeper skiplist
// (docs/PERFORMANCE.md). Issue 14 took them from 32 MB to 16 MB for
// memory; the change feed then doubled what a write puts in them, and an
// import spent a tenth more of its CPU flushing and compacting, so they
// are 32 MB again (issue 32). Pebble grows a new memtable from 256 KB, so
// a small directory does not pay for the size.
const memTableBytes = 32 << 20

// memTableReserve is what the block cache is enlarged by for the memtables
// Pebble charges to it: the mutable one and the one kept for reuse. More
// waiting to flush shrink the blocks' share for a while.
const memTableReserve = 2 * memTableBytes

// Options configure Open. A nil *Options, like a zero field, means the
// default; where a field can be none or at once, a negative one says so.
type Options struct {
	partmap.DirectoryOptions
	// CommitDelay holds the next WAL fsync back by this long after the
	// last one while more than CommitSiblings commits are waiting for
	// theirs, so that they share one, as PostgreSQL's commit_delay and
	// commit_siblings do. A lone writer never waits. 0 means
	// DefaultCommitDelay, and a negative one syncs at once. See
	// docs/PERFORMANCE.md.
	CommitDelay time.Duration
	// CommitSiblings is how many commits must be in flight before
	// CommitDelay applies; 0 means DefaultCommitSiblings, and a negative
	// one none.
	CommitSiblings int
	// CacheBytes is the block cache's share for blocks; 0 means
	// DefaultCacheBytes. The cache is made larger by the memtables Pebble
	// charges to it.
	CacheBytes int64
	// RecordCacheBytes bounds the cache of records that lookups of one
	// profile are answered from (DESIGN.md); 0 means
	// DefaultRecordCacheBytes and a negative one no cache.
	RecordCacheBytes int64
	// FS is the filesystem; nil means the operating system's. Tests use
	// Pebble's crashable in-memory FS to drop every unsynced byte.
	FS vfs.FS
}

// Store is a customer directory in a Pebble database on local disk. It is a
// partmap.Store; Close releases the data directory.
type Store struct {
	partmap.Store // the directory this database holds
	dir           *directory.Directory
	db            *pebble.DB
	backend       *backend
	lock          *pebble.Lock
	path          string // the data directory
	fs            vfs.FS
	stopScan      func() // ends the presence filter's scan, if it still runs
	closeOnce     sync.Once
	closeErr      error
}

// Open opens or creates the directory stored at path.
func Open(path string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	limitMallocArenas()
	dopts := directory.Options{DirectoryOptions: o.DirectoryOptions}
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
	fail := func(err error) (*Store, error) {
		lock.Close()
		return nil, fmt.Errorf("data directory %s: %w", path, err)
	}
	// Pebble charges its memtables to the block cache: a cache of only
	// CacheBytes was wholly reserved by two memtables after the first
	// flush, and from then on cached nothing, so every read went to the
	// disk and decompressed its blocks (docs/PERFORMANCE.md, issue 14).
	popts := &pebble.Options{Logger: quietLogger{}, Lock: lock, FS: o.FS, CacheSize: cmp.Or(o.CacheBytes, DefaultCacheBytes) + memTableReserve, MemTableSize: memTableBytes}
	b := &backend{cache: newRecordCache(cmp.Or(o.RecordCacheBytes, DefaultRecordCacheBytes))}
	if delay, siblings := cmp.Or(o.CommitDelay, DefaultCommitDelay), max(cmp.Or(o.CommitSiblings, DefaultCommitSiblings), 0); delay > 0 {
		// Pebble asks after each fsync how long to hold the next one back.
		popts.WALMinSyncInterval = func() time.Duration { return b.syncDelay(delay, siblings) }
	}
	// Every read is a point lookup of one record: Bloom filters let it skip
	// the sstables that cannot hold the key instead of searching them.
	for i := range popts.Levels {
		popts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	if !fresh {
		// Check an existing directory read-only, so that a directory this
		// code must refuse is left exactly as it was.
		if err := inspect(path, popts, dopts); err != nil {
			return fail(err)
		}
	}
	db, err := pebble.Open(path, popts)
	if err != nil {
		return fail(fmt.Errorf("cannot be opened: %w", err))
	}
	if o.FS == vfs.Default {
		removeStaleBackups(path) // this process holds the directory: no backup of it runs
	}
	// A crash in the middle of a resize, or of the removal of the
	// generation one replaced, is finished here.
	b.db = db
	if err := b.loadFeed(); err != nil {
		db.Close()
		return fail(err)
	}
	// The filter of stored record keys exists before anything commits;
	// its scan of the keys stored runs in the background.
	gens, err := generations(db)
	var profiles int64
	if err == nil {
		profiles, err = storedProfiles(db, gens)
	}
	if err != nil {
		db.Close()
		return fail(err)
	}
	b.present = newPresence(profiles)
	scanCtx, stopScan := context.WithCancel(context.Background())
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		b.present.fill(scanCtx, db, gens) // on an error it is never ready, and lookups read Pebble
	}()
	stopPresenceScan := func() { stopScan(); <-scanned }
	dir, err := directory.Open(context.Background(), b, dopts)
	if err != nil {
		stopPresenceScan()
		db.Close()
		return fail(err)
	}
	return &Store{Store: dir, dir: dir, db: db, backend: b, lock: lock, path: path, fs: o.FS, stopScan: stopPresenceScan}, nil
}

// Close releases the data directory. Every acknowledged write is already
// durable, so Close has nothing to save; a resize in progress stops, to
// resume at the next Open. Calling Close again does nothing.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.dir.Close()
		s.stopScan()
		s.closeErr = errors.Join(s.db.Close(), s.lock.Close())
	})
	return s.closeErr
}

// Sweep runs one pass of the expiry sweeper now, for
// tests and benchmarks that run without the background one.
func (s *Store) Sweep(ctx context.Context) (partmap.SweepStats, error) { return s.dir.Sweep(ctx) }

// TrimFeed trims the change feed to its retention now, as the directory
// does every few seconds, and describes what is left.
func (s *Store) TrimFeed(ctx context.Context) (partmap.FeedStats, error) { return s.dir.TrimFeed(ctx) }

// DeleteAllProfiles deletes every profile under the whole-map lock
// (partmap.Emptier).
func (s *Store) DeleteAllProfiles(ctx context.Context) (int64, error) {
	return s.dir.DeleteAllProfiles(ctx)
}

var _ partmap.Emptier = (*Store)(nil)

// CountDeadlines counts the profiles with deadlines
// (partmap.DeadlineCounter).
func (s *Store) CountDeadlines(ctx context.Context) (partmap.DeadlineCounts, error) {
	return s.dir.CountDeadlines(ctx)
}

var _ partmap.DeadlineCounter = (*Store)(nil)

// Changes reads the change feed (partmap.Feeder).
func (s *Store) Changes(ctx context.Context, q partmap.ChangeQuery) (partmap.ChangePage, error) {
	return s.dir.Changes(ctx, q)
}

// Collectors returns the store's Prometheus metrics: partition-lock waits,
// commit latencies, and Pebble's own figures (metrics.go).
func (s *Store) Collectors() []prometheus.Collector {
	return append(s.dir.Collectors(), dbCollector{s.db, s.backend})
}

// checkDataDirectory creates path if it is missing and reports whether it
// is new (missing or empty). A non-empty directory that holds no Pebble
// database of this version is somebody else's: it is refused before
// anything, even a lock file, is written there.
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
		if strings.HasPrefix(name, "marker.manifest.") {
			return false, nil
		}
	}
	return false, fmt.Errorf("data directory %s is not a partmap directory: it is not empty and holds no partmap data (found %q); refusing to write to it", path, names[0])
}

// inspect opens an existing database read-only and checks that the
// directory would serve it.
//
// A database with no key at all is one whose first open was interrupted
// before its metadata was written: it is fresh, not foreign.
func inspect(path string, popts *pebble.Options, dopts directory.Options) error {
	ro := *popts
	ro.ReadOnly = true
	db, err := pebble.Open(path, &ro)
	if err != nil {
		return fmt.Errorf("cannot be read (%w); refusing to change it", err)
	}
	defer db.Close()
	exists, err := directory.Inspect(context.Background(), &backend{db: db}, dopts)
	if err != nil || exists {
		return err
	}
	it, err := db.NewIter(nil)
	if err != nil {
		return err
	}
	defer it.Close()
	if it.First() {
		return fmt.Errorf("is a Pebble database without partmap metadata; refusing to change it")
	}
	return it.Error()
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
