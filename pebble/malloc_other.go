//go:build !linux || !cgo

package pebble

// limitMallocArenas has nothing to do: without cgo Pebble allocates with
// Go, and elsewhere the C allocator is not glibc's.
func limitMallocArenas() {}
