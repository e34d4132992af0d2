package redis

import "github.com/partmap/partmap/internal/engine"

// Engine is the directory's engine, for tests that hold a partition's lock
// or invoke the engine directly.
func (s *Store) Engine() *engine.Engine { return s.dir.Engine() }

// SetTxHook makes every commit of several partitions call f after each
// step of its protocol, with the step's name: "primary", "prepared",
// "decided", "rolled" (once per other partition), so that a test can stop
// the committer there. Nil removes it.
func SetTxHook(f func(step string)) { txHook = f }
