package redis

import (
	"context"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap/internal/engine"
)

// HintFlush is how often a server writes the hints of its commits.
const HintFlush = hintFlush

// Namespace is the store's namespace.
func (s *Store) Namespace() string { return s.hints.b.ns }

// FlushHints writes the hints of the store's commits now.
func (s *Store) FlushHints(ctx context.Context) error { return s.hints.flush(ctx) }

// Engine is the directory's engine, for tests that hold a partition's lock
// or invoke the engine directly.
func (s *Store) Engine() *engine.Engine { return s.dir.Engine() }

// SetTxHook makes every commit of several partitions call f after each
// step of its protocol, with the step's name: "primary", "prepared",
// "decided", "rolled" (once per other partition), so that a test can stop
// the committer there. Nil removes it.
func SetTxHook(f func(step string)) {
	if f == nil {
		txHook.Store(nil)
	} else {
		txHook.Store(&f)
	}
}

// SetReplicaHook makes every script's WAIT count f's acked replicas
// instead of what it found, and a short one see connected replicas on its
// master, so that a test can make one master's replica fall behind, or
// go. Nil removes it.
func SetReplicaHook(f func(keys []string) (acked, connected int)) {
	if f == nil {
		replicaHook.Store(nil)
	} else {
		replicaHook.Store(&f)
	}
}

// Replicas is how many replicas node's ROLE lists (backend.run asks it
// after a short WAIT).
func Replicas(ctx context.Context, node *goredis.Client) int { return replicas(ctx, node) }
