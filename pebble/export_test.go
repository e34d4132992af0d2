package pebble

import "github.com/partmap/partmap/internal/engine"

// Engine is the directory's engine, for tests that hold a partition's lock
// or invoke the engine directly.
func (s *Store) Engine() *engine.Engine { return s.dir.Engine() }

// DelayedSyncs counts the fsyncs held back for companions (CommitDelay).
func (s *Store) DelayedSyncs() int64 { return s.backend.delayed.Load() }
