package partmap

import "context"

// Emptier is a store that can delete every profile in one call, as Redis's
// FLUSHALL does: Pebble and Redis are Emptiers. The HTTP API has no such
// route, and its client is none.
type Emptier interface {
	// DeleteAllProfiles deletes every profile, each as DeleteProfile
	// would, with one delete event in the change feed (expired if it had
	// expired and the sweeper had not reclaimed it yet), under the
	// whole-map lock: writers meanwhile meet lock conflicts, and retry.
	// It deletes a page of profiles per commit, so that it never holds
	// more than a page in memory, whatever the directory's size, and
	// returns once every commit is durable, with how many live profiles
	// it deleted. Readers see the partitions emptied one after another,
	// not all at one instant. An error leaves the profiles not yet
	// deleted, and a second call finishes; if another holds the whole-map
	// lock, it is ELOCKCONFLICT.
	DeleteAllProfiles(ctx context.Context) (deleted int64, err error)
}
