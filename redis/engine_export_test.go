package redis

import "github.com/partmap/partmap/internal/engine"

// Engine is the directory's engine, for tests that hold a partition's lock
// or invoke the engine directly.
func (s *Store) Engine() *engine.Engine { return s.dir.Engine() }
