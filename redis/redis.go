// Package redis is a partmap store on Redis, for when one machine is not
// enough. Every key of a partition carries the hash tag {partition-NNN}, so
// a partition lives in one slot of a Redis Cluster and can be changed
// atomically by one Lua script; the partitions spread over the masters.
//
// Locks live in Redis too, with a random token and a time to live, so that
// several partmap servers on one Redis serialise their writes to each
// partition: the commit script refuses a caller that no longer holds its
// lock, and a write of one profile, which takes no lock in Redis, while
// another holds the lock or the record changed since it was read. A commit
// of several partitions, which no one script can span on a cluster, is a
// transaction of single-slot steps that any reader or writer who meets it
// completes or aborts, so that it is atomic even when its committer dies
// (DESIGN.md).
//
// # Caveats
//
//   - A store is as durable as Redis is configured to be, and replication
//     is asynchronous: a failover to a replica that lacks an acknowledged
//     write loses it. MinReplicasAck narrows the window, not closes it.
//   - A batch lookup reads each partition at its own instant: it is not a
//     snapshot of the directory, where a transaction and an export are.
//   - An export holds every partition's lock while it runs: writers get
//     lock conflicts meanwhile.
//   - There is no partmap backup of a Redis store: use Redis's persistence,
//     or an export.
//
// Open a directory on a go-redis client and use the result as a
// partmap.Store:
//
//	s, err := redis.Open(ctx, goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379"}), nil)
//	...
//	defer s.Close()
package redis

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/directory"
)

// Options configure Open. A nil *Options, like a zero field, means the
// default; where a field can be none, a negative one says so.
// On Redis, FeedRetention's count is shared evenly between the
// partitions' feeds, so it is approximate (DESIGN.md).
type Options struct {
	partmap.DirectoryOptions
	// LockTTL bounds how long a lock outlives a server that died holding
	// it, or a release lost in a failover; a live holder renews its locks
	// every third of it. 0 means 2 s.
	LockTTL time.Duration
	// MinReplicasAck makes every commit WAIT until this many replicas have
	// acknowledged it, for up to ReplicaAckTimeout (0 means 1 s); a commit
	// that gets fewer is applied on the master but answered as unavailable.
	// Replication stays asynchronous: see DESIGN.md for what it can lose.
	MinReplicasAck    int
	ReplicaAckTimeout time.Duration
	// Namespace lets several directories share one Redis: it goes into
	// every key, after the partition's hash tag. "" is the default directory.
	Namespace string
	// FinishInterval is how often this server looks for transactions
	// whose committer died, on partitions nobody reads or writes, and
	// ends them (their other partitions' changes reach the feed then): 0
	// means every half LockTTL, a negative one never (tests that count
	// commands). Each look is one read of the hints transactions leave,
	// and a read of each partition a hint names that is due.
	FinishInterval time.Duration
	// BackstopRate is how many partitions a second the backstop reads,
	// one script each, for what a lost hint would hide (a server that
	// died before it wrote its hints, a failover that lost some): 0
	// means DefaultBackstopRate, a negative one none (tests). A round
	// over every partition takes the partition count over the rate
	// (250 s for 1,000 partitions at 4 a second).
	BackstopRate int
	// IndexPoll is how often this server reads the metadata for search
	// indexes other servers created or dropped: 0 means 250 ms (4 GETs a
	// second), a negative one never, for a server alone on its Redis,
	// which then hears of another's indexes only when it opens. A build
	// or a cleaning of an index waits four of these before it starts, so
	// that every server keeps the index's entries by then (DESIGN.md,
	// Search indexes).
	IndexPoll time.Duration
}

// feedPoll is how often a long-poll of the change feed reads it again:
// each read runs a script on every partition's feed.
const feedPoll = 200 * time.Millisecond

// Store is a customer directory in Redis. It is a partmap.Store; Close
// closes the client.
type Store struct {
	partmap.Store // the directory this Redis holds
	dir           *directory.Directory
	client        goredis.UniversalClient
	batch         *batcher
	hints         *hinter
	stop          context.CancelFunc // the finisher's and the backstop's
	wg            sync.WaitGroup     // they are gone once it is done
}

// Open serves the directory in client's Redis (or Redis Cluster), creating
// its metadata when there is none and refusing metadata that is not
// partmap's, is from a newer partmap, or indexes other fields than asked.
// A resize that a crash interrupted resumes.
func Open(ctx context.Context, client goredis.UniversalClient, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.LockTTL = cmp.Or(o.LockTTL, 2*time.Second)
	b := &backend{client: client, ttl: o.LockTTL, ns: o.Namespace, acks: o.MinReplicasAck, ackTimeout: cmp.Or(o.ReplicaAckTimeout, time.Second),
		batch: newBatcher(client, batchWorkers), retention: *cmp.Or(o.FeedRetention, &partmap.DefaultRetention), clock: o.Clock}
	b.hints = newHinter(b)
	go b.hints.run()
	// A commit of several partitions is atomic (tx.go) but costs far more
	// round trips than a commit of each; the commit script checks
	// versions, so a write of one partition needs no lock round trips.
	dir, err := directory.Open(ctx, b, directory.Options{DirectoryOptions: o.DirectoryOptions,
		CommitPerPartition: true, CheckedWrites: true, FeedPoll: feedPoll, IndexPoll: o.IndexPoll})
	if err == nil {
		// Before this server's first write: the change feed's readers read
		// a feed per partition of every layout there has been.
		if err = b.ensureStreams(ctx, (*b.serving.Load())[0].Partitions); err != nil {
			dir.Close()
		}
	}
	if err != nil {
		b.hints.close()
		b.batch.close()
		return nil, fmt.Errorf("redis: %s: %w", b.metaKey(), err)
	}
	s := &Store{Store: dir, dir: dir, client: client, batch: b.batch, hints: b.hints}
	fctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	if o.FinishInterval >= 0 {
		s.wg.Add(1)
		go s.finisher(fctx, b, cmp.Or(o.FinishInterval, o.LockTTL/2))
	}
	if o.BackstopRate >= 0 {
		s.wg.Add(1)
		go s.backstop(fctx, b, cmp.Or(o.BackstopRate, DefaultBackstopRate))
	}
	return s, nil
}

// finisher ends abandoned transactions every interval (finishHinted),
// until ctx ends.
func (s *Store) finisher(ctx context.Context, b *backend, interval time.Duration) {
	defer s.wg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// A failure is the next look's to retry: readers and writers end
		// what they meet meanwhile.
		b.finishHinted(ctx)
	}
}

// Close stops a resize in progress, to resume at the next Open, writes
// the hints of this server's last commits, and closes the client.
func (s *Store) Close() error {
	s.stop()
	s.wg.Wait()
	s.dir.Close()
	s.hints.close()
	s.batch.close()
	return s.client.Close()
}

// Sweep runs one pass of the expiry sweeper now, for
// tests and benchmarks that run without the background one.
func (s *Store) Sweep(ctx context.Context) (partmap.SweepStats, error) { return s.dir.Sweep(ctx) }

// TrimFeed trims the change feed to its retention now, as the directory
// does every few seconds, and describes what is left.
func (s *Store) TrimFeed(ctx context.Context) (partmap.FeedStats, error) { return s.dir.TrimFeed(ctx) }

// DeleteAllProfiles deletes every profile under the whole-map lock
// (partmap.Emptier).
func (s *Store) DeleteAllProfiles(ctx context.Context) (int64, error) {
	return s.dir.DeleteAllProfiles(ctx)
}

var _ partmap.Emptier = (*Store)(nil)

// CountDeadlines counts the profiles with deadlines
// (partmap.DeadlineCounter).
func (s *Store) CountDeadlines(ctx context.Context) (partmap.DeadlineCounts, error) {
	return s.dir.CountDeadlines(ctx)
}

var _ partmap.DeadlineCounter = (*Store)(nil)

// Changes reads the change feed (partmap.Feeder).
func (s *Store) Changes(ctx context.Context, q partmap.ChangeQuery) (partmap.ChangePage, error) {
	return s.dir.Changes(ctx, q)
}

// Collectors returns the store's Prometheus metrics: partition-lock waits,
// commit latencies, and how many commands each round trip to Redis
// carried.
func (s *Store) Collectors() []prometheus.Collector {
	return append(s.dir.Collectors(), s.batch.collectors()...)
}

// The Lua scripts, one per file, each headed by its KEYS and ARGV layout.
// Script.Run sends EVALSHA and falls back to EVAL after a NOSCRIPT, as after
// a failover.
var (
	//go:embed scripts/*.lua
	scriptFiles embed.FS

	commitScript  = script("commit")
	releaseScript = script("release")
	extendScript  = script("extend")
	takeScript    = script("take")
	abortScript   = script("abort")
	statusScript  = script("status")
	fenceScript   = script("fence")
	dropScript    = script("drop")
	entriesScript = script("indexentries")
)

// luaScript is a script with its source, which EVAL sends.
type luaScript struct {
	*goredis.Script
	src string
}

func script(name string) *luaScript {
	src, err := scriptFiles.ReadFile("scripts/" + name + ".lua")
	if err != nil {
		panic(err)
	}
	return &luaScript{goredis.NewScript(string(src)), string(src)}
}

// scriptError returns the code a script's error reply starts with
// (PARTMAP_LOCK_LOST, PARTMAP_STALE), or "" for any other error.
func scriptError(err error) string {
	var rerr goredis.Error
	if !errors.As(err, &rerr) {
		return ""
	}
	code, _, _ := strings.Cut(rerr.Error(), " ")
	if !strings.HasPrefix(code, "PARTMAP_") {
		return ""
	}
	return code
}

// unavailable marks Redis trouble (a connection refused, a failover) as a
// retryable 503 rather than an internal error.
func unavailable(err error) error {
	if err == nil || errors.Is(err, goredis.Nil) {
		return err
	}
	var perr *partmap.Error
	if errors.As(err, &perr) {
		return err
	}
	return &partmap.Error{Code: partmap.EUNAVAILABLE, Message: "the Redis store cannot answer now; retry", Err: err}
}
