// Package bucket re-implements the storage of the original Hash-Partitioned
// AttributeMap design, as a baseline for benchmarks: each partition is one
// value holding the dictionary of all its profiles, and every write reads,
// changes and rewrites that whole value. It runs on the same Pebble, with
// the same record encoding, engine, locks and fsync as partmap's store, so
// that only the storage layout differs.
package bucket

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/directory"
	"github.com/partmap/partmap/internal/engine"
	"github.com/partmap/partmap/internal/record"
)

// Store is a directory whose partitions are single values.
type Store struct {
	partmap.Store
	dir *directory.Directory
	db  *pebble.DB
}

// Open opens or creates a bucket store at path. It indexes no field.
func Open(path string, lockWait time.Duration) (*Store, error) {
	db, err := pebble.Open(path, &pebble.Options{CacheSize: 64 << 20, Logger: quiet{}})
	if err != nil {
		return nil, err
	}
	dir, err := directory.Open(context.Background(), &backend{db: db}, directory.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: lockWait, Indexes: []string{}, SweepInterval: -1}})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &Store{Store: dir, dir: dir, db: db}, nil
}

// Close closes the database.
func (s *Store) Close() error {
	s.dir.Close()
	return s.db.Close()
}

// backend is the engine.Backend of the original design's storage, the
// smallest there can be: no locks to share, no marks, no change feed (the
// original design publishes none), no index entries (its directory indexes
// nothing).
type backend struct {
	db     *pebble.DB
	metaMu sync.Mutex
}

var _ engine.Backend = (*backend)(nil)

var metaKey = []byte("m")

// bucketKey is a partition's one value: 'b', generation, partition.
func bucketKey(part engine.Part) []byte {
	k := binary.BigEndian.AppendUint32([]byte{'b'}, uint32(part.Generation))
	return binary.BigEndian.AppendUint32(k, uint32(part.Partition))
}

// bucket is a partition's dictionary, as the original design keeps it.
type bucket map[string]partmap.Record

func load(r pebble.Reader, part engine.Part) (bucket, error) {
	v, closer, err := r.Get(bucketKey(part))
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

func (b *backend) Meta(_ context.Context, update func([]byte) ([]byte, error)) ([]byte, error) {
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	var old []byte
	v, closer, err := b.db.Get(metaKey)
	switch {
	case err == nil:
		old = bytes.Clone(v)
		closer.Close()
	case !errors.Is(err, pebble.ErrNotFound):
		return nil, err
	}
	if update == nil {
		return old, nil
	}
	v, err = update(old)
	if err != nil || bytes.Equal(v, old) {
		return v, err
	}
	return v, b.db.Set(metaKey, v, pebble.Sync)
}

// Get reads the whole bucket to find the profiles, as the original does.
func (b *backend) Get(_ context.Context, part engine.Part, emails []string) ([]*partmap.Record, error) {
	bk, err := load(b.db, part)
	if err != nil {
		return nil, err
	}
	out := make([]*partmap.Record, len(emails))
	for i, e := range emails {
		if rec, ok := bk[e]; ok {
			out[i] = &rec
		}
	}
	return out, nil
}

// Commit reads each touched bucket, applies the writes and rewrites it
// whole, with the same group-committed fsync as partmap's store.
func (b *backend) Commit(_ context.Context, _ engine.Lease, writes []engine.Write) (func() error, error) {
	touched := map[engine.Part]bucket{}
	for _, w := range writes {
		bk, ok := touched[w.Part]
		if !ok {
			var err error
			if bk, err = load(b.db, w.Part); err != nil {
				return nil, err
			}
			touched[w.Part] = bk
		}
		if w.Record != nil {
			bk[w.Email] = *w.Record
		} else {
			delete(bk, w.Email)
		}
	}
	batch := b.db.NewBatch()
	for part, bk := range touched {
		var err error
		if len(bk) == 0 {
			err = batch.Delete(bucketKey(part), nil)
		} else {
			err = batch.Set(bucketKey(part), encode(bk), nil)
		}
		if err != nil {
			batch.Close()
			return nil, err
		}
	}
	if err := b.db.ApplyNoSyncWait(batch, pebble.Sync); err != nil {
		batch.Close()
		return nil, err
	}
	return func() error {
		defer batch.Close()
		return batch.SyncWait()
	}, nil
}

// Scan walks buckets in partition order and each bucket in email order.
func (b *backend) Scan(_ context.Context, q engine.Query) ([]engine.Item, error) {
	return scan(b.db, q)
}

func (b *backend) Snapshot(context.Context, engine.Layout) (engine.Snapshot, error) {
	return snapshot{b.db.NewSnapshot()}, nil
}

type snapshot struct{ snap *pebble.Snapshot }

func (s snapshot) Scan(_ context.Context, q engine.Query) ([]engine.Item, error) {
	return scan(s.snap, q)
}

func (s snapshot) Close() error { return s.snap.Close() }

func scan(r pebble.Reader, q engine.Query) ([]engine.Item, error) {
	var items []engine.Item
	first := partmap.Partition(0)
	if q.After != nil {
		first = q.After.Partition
	}
	for p := first; p < q.End && len(items) < q.Limit; p++ {
		bk, err := load(r, engine.Part{Generation: q.Generation, Partition: p})
		if err != nil {
			return nil, err
		}
		for _, email := range slices.Sorted(maps.Keys(bk)) {
			if q.After != nil && p == q.After.Partition && email <= q.After.Email {
				continue
			}
			items = append(items, engine.Item{Position: engine.Position{Partition: p, Email: email}, Record: bk[email]})
			if len(items) == q.Limit {
				break
			}
		}
	}
	return items, nil
}

func (b *backend) Counts(_ context.Context, gen int, first, end partmap.Partition) ([]partmap.PartitionCount, error) {
	var out []partmap.PartitionCount
	for p := first; p < end; p++ {
		bk, err := load(b.db, engine.Part{Generation: gen, Partition: p})
		if err != nil {
			return nil, err
		}
		if len(bk) > 0 {
			out = append(out, partmap.PartitionCount{Partition: p, Profiles: int64(len(bk))})
		}
	}
	return out, nil
}

// IndexEntries finds none: the baseline keeps no secondary index.
func (b *backend) IndexEntries(context.Context, engine.Part) ([]engine.IndexEntry, error) {
	return nil, nil
}

// Due reads every bucket in range, as the original design would: it keeps
// no expiry entries either. Its directory runs no sweeper (Open), so this
// serves only the counts of expired profiles not yet deleted.
func (b *backend) Due(_ context.Context, gen int, first, end partmap.Partition, before int64, limit int, after *engine.Due) ([]engine.Due, error) {
	if after != nil {
		return nil, nil // its directory runs no sweeper, the one caller that pages
	}
	var out []engine.Due
	for p := first; p < end && len(out) < limit; p++ {
		bk, err := load(b.db, engine.Part{Generation: gen, Partition: p})
		if err != nil {
			return nil, err
		}
		var found []engine.Due
		for email, rec := range bk {
			for _, e := range engine.Entries(nil, email, &rec) {
				at, profile, _ := engine.ParseExpiryValue(e.Value)
				if at < before {
					found = append(found, engine.Due{Partition: p, Email: email, Deadline: at, Profile: profile})
				}
			}
		}
		slices.SortFunc(found, func(a, b engine.Due) int { return cmp.Compare(a.Deadline, b.Deadline) })
		out = append(out, found...)
	}
	return out[:min(len(out), limit)], nil
}

// Drop deletes a generation's buckets.
func (b *backend) Drop(_ context.Context, l engine.Layout) error {
	lo := bucketKey(engine.Part{Generation: l.Generation})
	hi := bucketKey(engine.Part{Generation: l.Generation + 1})
	return b.db.DeleteRange(lo, hi, pebble.Sync)
}

type quiet struct{}

func (quiet) Infof(string, ...any)      {}
func (quiet) Errorf(f string, a ...any) { fmt.Printf("pebble: "+f+"\n", a...) }
func (quiet) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
