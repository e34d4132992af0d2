package redis

import (
	"context"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/directory"
)

// snapshotLockWait is how long a snapshot waits for each busy partition
// lock. Writers hold a lock for a round trip or two, so it is generous.
const snapshotLockWait = 10 * time.Second

var extendScript = goredis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0`)

// Snapshot freezes the directory by holding the whole-map lock: Redis has
// no snapshots, and Redis Cluster cannot read many slots atomically. A lock
// lost meanwhile (a failover, a stalled process) fails the export rather
// than passing off a moving view as a snapshot.
func (b *backend) Snapshot(ctx context.Context) (directory.Snapshot, error) {
	h, err := b.holdAll(ctx, snapshotLockWait)
	if err != nil {
		return nil, err
	}
	return snapshotHold{h}, nil
}

type snapshotHold struct{ *frozen }

func (s snapshotHold) Scan(ctx context.Context, after *directory.Position, end partmap.Partition, limit int) ([]directory.Item, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	return s.b.Scan(ctx, after, end, limit)
}

func (s snapshotHold) Close() error { return s.Release() }

// HoldAll takes every partition lock and keeps them alive past their TTL
// until Release.
func (b *backend) HoldAll(ctx context.Context, wait time.Duration) (directory.Hold, error) {
	return b.holdAll(ctx, wait)
}

func (b *backend) holdAll(ctx context.Context, wait time.Duration) (*frozen, error) {
	n := 0
	for _, sp := range b.spaces {
		n += sp.n
	}
	all := make([]partmap.Partition, n)
	for i := range all {
		all[i] = partmap.Partition(i)
	}
	// The first locks must not expire while the last are awaited.
	l, err := b.lock(ctx, all, wait, wait+b.ttl)
	if err != nil {
		return nil, err
	}
	s := &frozen{b: b, lease: l, stop: make(chan struct{}), done: make(chan struct{})}
	go s.keepAlive()
	return s, nil
}

// frozen is the whole-map lock, kept alive until released.
type frozen struct {
	b     *backend
	lease *lease
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once

	mu   sync.Mutex
	lost error
}

func (s *frozen) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost
}

// keepAlive renews every lock at a third of its TTL, in one pipeline.
func (s *frozen) keepAlive() {
	defer close(s.done)
	tick := time.NewTicker(s.b.ttl / 3)
	defer tick.Stop()
	for s.extend() {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
	}
}

// extend renews every lock to the usual TTL, and reports whether all held.
func (s *frozen) extend() bool {
	ctx, cancel := context.WithTimeout(context.Background(), s.b.ttl/3)
	pipe := s.b.client.Pipeline()
	cmds := make([]*goredis.Cmd, len(s.lease.parts))
	for i, p := range s.lease.parts {
		cmds[i] = extendScript.Eval(ctx, pipe, []string{s.b.lockKey(p)}, s.lease.token, s.b.ttl.Milliseconds())
	}
	pipe.Exec(ctx)
	cancel()
	for i, c := range cmds {
		if n, err := c.Int(); err != nil || n != 1 {
			s.mu.Lock()
			if s.lost == nil {
				s.lost = partmap.Errorf(partmap.EUNAVAILABLE,
					"the export lost its lock on %s (a Redis failover or a stall), so it is not a consistent snapshot; run it again", s.lease.parts[i])
			}
			s.mu.Unlock()
			return false
		}
	}
	return true
}

// Release stops the keep-alive and releases the locks; an error means one
// was lost while held.
func (s *frozen) Release() error {
	s.once.Do(func() {
		close(s.stop)
		<-s.done
		s.lease.Release()
	})
	return s.err()
}
