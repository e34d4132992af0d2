//go:build linux && cgo

package pebble

/*
#include <malloc.h>
*/
import "C"

import "sync"

var arenasOnce sync.Once

// limitMallocArenas caps glibc's malloc arenas at two. Pebble allocates
// its memtables and block cache with C's malloc, and glibc gives each
// busy thread an arena of its own (up to eight per core) that keeps what
// was freed in it: a million-profile import left about 30 MB more resident
// with the default than with two (docs/PERFORMANCE.md). Pebble's
// allocations are large and few, so two arenas cost no contention worth
// measuring.
func limitMallocArenas() {
	arenasOnce.Do(func() { C.mallopt(C.M_ARENA_MAX, 2) })
}
