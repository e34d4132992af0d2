// Package partmap is the domain of a durable, hash-partitioned record store
// whose flagship application is a customer-profile directory keyed by email.
//
// The package holds what every backend and every client agrees on: how an
// email becomes a canonical key and a partition (bit-compatible with the
// original Hash-Partitioned AttributeMap design), what a profile is and which
// limits bound it, the error type and its codes, and the Store contract.
// Adapters named for their technology implement that contract: pebble (the
// embedded, durable default) and http (the server and the Go client).
//
// # Guarantees
//
// A write locks exactly one partition, reads only the records it touches and
// commits atomically; an acknowledged write has been fsync'd. Writes to
// different partitions never wait for each other. A lookup reads one record,
// so its cost does not depend on how many profiles share its partition. A
// batch lookup reads each partition it touches once, at one instant, and
// locks nothing; it is not a snapshot across partitions.
package partmap
