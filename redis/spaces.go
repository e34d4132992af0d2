package redis

import (
	"context"
	"encoding/json"
	"errors"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/directory"
	"github.com/partmap/partmap/internal/engine"
)

// spaces builds backends over the directory's layout versions, which all
// live in the one Redis under namespaces of their own.
type spaces struct{ base backend }

func (s *spaces) Backend(versions ...directory.Space) directory.Backend {
	b := s.base
	b.spaces = nil
	for i, v := range versions {
		accept := ",,"
		if i == 0 && len(versions) > 1 {
			accept = ",," + directory.StateResizing + ","
		}
		b.spaces = append(b.spaces, space{version: v.Version, n: v.Partitions, ns: spaceNS(b.ns, v.Version), accept: accept})
	}
	return &b
}

func (s *spaces) over(v directory.Space) *backend { return s.Backend(v).(*backend) }

// SplitCommits is true: a profile's two versions live in different slots,
// written by two scripts.
func (s *spaces) SplitCommits() bool { return true }

// Mark sets every partition's state in one pipeline per chunk.
func (s *spaces) Mark(ctx context.Context, v directory.Space, state string) error {
	b := s.over(v)
	for lo := 0; lo < v.Partitions; lo += 1000 {
		pipe := b.client.Pipeline()
		for p := lo; p < min(lo+1000, v.Partitions); p++ {
			pipe.Set(ctx, b.stateKey(partmap.Partition(p)), state, 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return unavailable(err)
		}
	}
	return nil
}

// Drop deletes a replaced version's keys partition by partition, keeping
// each partition's "retired" mark for servers that have not noticed.
func (s *spaces) Drop(ctx context.Context, v directory.Space) error {
	b := s.over(v)
	for p := range partmap.Partition(v.Partitions) {
		emails, err := b.client.ZRange(ctx, b.emailsKey(p), 0, -1).Result()
		if err != nil {
			return unavailable(err)
		}
		// Not the lock key: a whole-map lock may hold it (a resize starting
		// its copy over), and an old lock expires by itself.
		keys := []string{b.emailsKey(p), b.countKey(p)}
		for f := range b.indexes {
			keys = append(keys, b.indexKey(p, f))
		}
		for _, e := range emails {
			keys = append(keys, b.recordKey(p, e))
		}
		// One slot per partition, so a multi-key DEL is fine on a cluster.
		for len(keys) > 0 {
			chunk := keys[:min(len(keys), 500)]
			keys = keys[len(chunk):]
			if err := b.client.Del(ctx, chunk...).Err(); err != nil {
				return unavailable(err)
			}
		}
	}
	return nil
}

// UpdateMeta is an optimistic transaction on the metadata key.
func (s *spaces) UpdateMeta(ctx context.Context, fn func(*engine.Meta) error) (engine.Meta, error) {
	key := s.base.metaKey()
	var out engine.Meta
	for attempt := 0; attempt < 100; attempt++ {
		err := s.base.client.Watch(ctx, func(tx *goredis.Tx) error {
			v, err := tx.Get(ctx, key).Bytes()
			if err != nil {
				return err
			}
			var meta engine.Meta
			if err := json.Unmarshal(v, &meta); err != nil {
				return err
			}
			if err := fn(&meta); err != nil {
				return err
			}
			nv, err := json.Marshal(meta)
			if err != nil {
				return err
			}
			_, err = tx.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
				pipe.Set(ctx, key, nv, 0)
				return nil
			})
			out = meta
			return err
		}, key)
		if errors.Is(err, goredis.TxFailedErr) {
			continue // changed meanwhile: read again
		}
		var pe *partmap.Error
		if err != nil && !errors.As(err, &pe) && err != directory.ErrStale {
			err = unavailable(err)
		}
		return out, err
	}
	return out, partmap.Errorf(partmap.EUNAVAILABLE, "the metadata kept changing; retry")
}
