// Package bucket re-implements the storage of the original Hash-Partitioned
// AttributeMap design, as a baseline for benchmarks: each partition is one
// value holding the dictionary of all its profiles, and every write reads,
// changes and rewrites that whole value. It runs on the same Pebble, with
// the same record encoding, engine, locks and fsync as partmap's store, so
// that only the storage layout differs.
package bucket

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/directory"
	"github.com/partmap/partmap/internal/engine"
	"github.com/partmap/partmap/internal/pebbledb"
	"github.com/partmap/partmap/internal/record"
)

// Store is a directory whose partitions are single values.
type Store struct {
	*directory.Directory
	db *pebble.DB
}

var _ partmap.Store = (*Store)(nil)

// Open opens or creates a bucket store at path.
func Open(path string, lockWait time.Duration) (*Store, error) {
	db, err := pebble.Open(path, &pebble.Options{CacheSize: 64 << 20, Logger: quiet{}})
	if err != nil {
		return nil, err
	}
	b := &backend{db: db, locks: engine.NewLocalLocks(partmap.DefaultPartitions), Store: &pebbledb.Store{DB: db}}
	if _, ok, err := b.Read(); err != nil || !ok {
		if err == nil {
			err = b.Write(engine.NewMeta(1, partmap.DefaultPartitions, []string{}))
		}
		if err != nil {
			db.Close()
			return nil, err
		}
	}
	return &Store{Directory: directory.New(b, partmap.DefaultPartitions, directory.Options{LockWait: lockWait}), db: db}, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

type backend struct {
	db              *pebble.DB
	locks           *engine.LocalLocks
	*pebbledb.Store // metadata: Meta and Start
}

func bucketKey(p partmap.Partition) []byte {
	return binary.BigEndian.AppendUint32([]byte{'b'}, uint32(p))
}

// bucket is a partition's dictionary, as the original design keeps it.
type bucket map[string]partmap.Record

func (b *backend) load(p partmap.Partition) (bucket, error) { return load(b.db, p) }

func load(r pebble.Reader, p partmap.Partition) (bucket, error) {
	v, closer, err := r.Get(bucketKey(p))
	if errors.Is(err, pebble.ErrNotFound) {
		return bucket{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	n, w := binary.Uvarint(v)
	if w <= 0 {
		return nil, record.ErrCorrupt
	}
	v = v[w:]
	bk := make(bucket, n)
	for range n {
		el, w1 := binary.Uvarint(v)
		if w1 <= 0 || el > uint64(len(v)-w1) {
			return nil, record.ErrCorrupt
		}
		email := string(v[w1 : w1+int(el)])
		v = v[w1+int(el):]
		rl, w2 := binary.Uvarint(v)
		if w2 <= 0 || rl > uint64(len(v)-w2) {
			return nil, record.ErrCorrupt
		}
		rec, err := record.Decode(v[w2 : w2+int(rl)])
		if err != nil {
			return nil, err
		}
		bk[email] = rec
		v = v[w2+int(rl):]
	}
	return bk, nil
}

func encode(bk bucket) []byte {
	out := binary.AppendUvarint(nil, uint64(len(bk)))
	for email, rec := range bk {
		r := record.Encode(rec)
		out = binary.AppendUvarint(out, uint64(len(email)))
		out = append(out, email...)
		out = binary.AppendUvarint(out, uint64(len(r)))
		out = append(out, r...)
	}
	return out
}

func (b *backend) Lock(ctx context.Context, ps []partmap.Partition, wait time.Duration) (engine.Lease, error) {
	return b.locks.Lock(ctx, ps, wait)
}

// Get reads the whole bucket to find one profile, as the original does.
func (b *backend) Get(_ context.Context, p partmap.Partition, email string) (partmap.Record, bool, error) {
	bk, err := b.load(p)
	if err != nil {
		return partmap.Record{}, false, err
	}
	rec, ok := bk[email]
	return rec, ok, nil
}

// Commit reads each touched bucket, applies the writes and rewrites it
// whole, with the same group-committed fsync as partmap's store.
func (b *backend) Commit(_ context.Context, _ engine.Lease, writes []engine.Write) (func() error, error) {
	touched := map[partmap.Partition]bucket{}
	for _, w := range writes {
		bk, ok := touched[w.Partition]
		if !ok {
			var err error
			if bk, err = b.load(w.Partition); err != nil {
				return nil, err
			}
			touched[w.Partition] = bk
		}
		if w.Record != nil {
			bk[w.Email] = *w.Record
		} else {
			delete(bk, w.Email)
		}
	}
	batch := b.db.NewBatch()
	for p, bk := range touched {
		var err error
		if len(bk) == 0 {
			err = batch.Delete(bucketKey(p), nil)
		} else {
			err = batch.Set(bucketKey(p), encode(bk), nil)
		}
		if err != nil {
			batch.Close()
			return nil, err
		}
	}
	return pebbledb.Commit(b.db, batch)
}

// Scan walks buckets in partition order and each bucket in email order.
func (b *backend) Scan(_ context.Context, after *directory.Position, end partmap.Partition, limit int) ([]directory.Item, error) {
	return scan(b.db, after, end, limit)
}

func (b *backend) Snapshot(context.Context) (directory.Snapshot, error) {
	return snapshot{b.db.NewSnapshot()}, nil
}

type snapshot struct{ snap *pebble.Snapshot }

func (s snapshot) Scan(_ context.Context, after *directory.Position, end partmap.Partition, limit int) ([]directory.Item, error) {
	return scan(s.snap, after, end, limit)
}

func (s snapshot) Close() error { return s.snap.Close() }

func scan(r pebble.Reader, after *directory.Position, end partmap.Partition, limit int) ([]directory.Item, error) {
	var items []directory.Item
	first := partmap.Partition(0)
	if after != nil {
		first = after.Partition
	}
	for p := first; p < end && len(items) < limit; p++ {
		bk, err := load(r, p)
		if err != nil {
			return nil, err
		}
		for _, email := range slices.Sorted(maps.Keys(bk)) {
			if after != nil && p == after.Partition && email <= after.Email {
				continue
			}
			items = append(items, directory.Item{Position: directory.Position{Partition: p, Email: email}, Record: bk[email]})
			if len(items) == limit {
				break
			}
		}
	}
	return items, nil
}

func (b *backend) Counts(context.Context) ([]partmap.PartitionCount, error) {
	var out []partmap.PartitionCount
	for p := range partmap.Partition(partmap.DefaultPartitions) {
		bk, err := b.load(p)
		if err != nil {
			return nil, err
		}
		if len(bk) > 0 {
			out = append(out, partmap.PartitionCount{Partition: p, Profiles: int64(len(bk))})
		}
	}
	return out, nil
}

type quiet struct{}

func (quiet) Infof(string, ...any)      {}
func (quiet) Errorf(f string, a ...any) { fmt.Printf("pebble: "+f+"\n", a...) }
func (quiet) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }

// The baseline keeps no secondary indexes: its directory indexes no field,
// so Search is never called.
func (b *backend) Search(context.Context, []directory.IndexMatch, *directory.Position, int) ([]directory.Item, error) {
	return nil, errors.New("bucket: no secondary indexes")
}

func (b *backend) IndexEntries(context.Context, partmap.Partition) ([]directory.IndexEntry, error) {
	return nil, nil
}

func (b *backend) Count(_ context.Context, p partmap.Partition) (int64, error) {
	bk, err := b.load(p)
	return int64(len(bk)), err
}

func (b *backend) HoldAll(ctx context.Context, wait time.Duration) (directory.Hold, error) {
	return directory.HoldLocal(ctx, b.locks, partmap.DefaultPartitions, wait)
}
