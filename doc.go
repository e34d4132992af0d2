// Package partmap is the domain of a durable, hash-partitioned record store
// whose flagship application is a customer-profile directory keyed by email.
//
// The package holds what every backend and every client agrees on: how an
// email becomes a canonical key and a partition (bit-compatible with the
// original Hash-Partitioned AttributeMap design), what a profile is and which
// limits bound it, the error type and its codes, the Store contract, and the
// operations every front door speaks (Operation, and its JSON form,
// OperationJSON). Adapters named for their technology implement the
// contract: pebble (the embedded, durable default), redis (Redis and Redis
// Cluster) and http (the server, and a Go client that is a Store too);
// resp serves a Store over the Redis protocol, and postgres projects one
// into PostgreSQL.
//
// # Guarantees
//
// A write of one profile locks only that profile's partition (a rename its
// two, a transaction every partition it names), reads only the records it
// touches and commits atomically; a transaction commits all its operations
// or none. On pebble an acknowledged write has been fsync'd. Writes to
// different partitions never wait for each other's locks. A lookup reads
// one record, so its cost does not depend on how many profiles share its
// partition. A batch lookup reads each partition it touches once and locks
// nothing; on pebble the whole batch is read at one instant.
//
// # Caveats
//
//   - On redis a batch lookup is not a snapshot: each partition is read at
//     its own instant, so a rename or transaction committing meanwhile can
//     show in one partition and not another. A transaction of get
//     operations, and an export, are read at one instant.
//   - On redis an acknowledged write is in the master's memory (and its
//     AOF, if configured): replication is asynchronous, and a failover to
//     a replica that lacks the write loses it. redis.Options.MinReplicasAck
//     narrows that window without closing it, and answers EUNAVAILABLE
//     (the write applied on the master) when too few replicas acknowledge.
//   - On pebble a reader can see a write a few hundred microseconds before
//     it is durable; a power loss then loses a write that was never
//     acknowledged but that a reader may have seen.
//   - A profile keeps no field order. Its JSON lists the documented fields
//     first and the others in byte order of their names; the Redis
//     protocol lists every field in byte order, where Redis keeps a small
//     hash's insertion order.
//   - Over the Redis protocol a profile's hash leaves out emailAddress,
//     which the key is; a profile of its key alone (which HTTP and imports
//     can make) reads there as a missing key, but DBSIZE and INFO count it.
//   - Store.Transact names at most MaxTransactionOps (100) profiles and runs
//     at most MaxTransactionSteps (10,000) operations; the HTTP transaction
//     route takes at most 100 operations, and is all or nothing: it does
//     not carry Operation.FailAlone, which the HTTP client refuses.
//   - Over the Redis protocol, DEL and UNLINK are atomic up to 100 keys;
//     more are deleted a hundred at a time, each hundred atomically.
//   - Emptier.DeleteAllProfiles (FLUSHALL) holds writers off while it
//     runs, but a reader sees the partitions emptied one after another.
//   - Deadlines, and the whole-map lock's end, are compared with the clock
//     of the server that reads them: servers sharing a Redis should agree
//     on the time.
//
// DESIGN.md explains each of these, and lists the rest.
package partmap
