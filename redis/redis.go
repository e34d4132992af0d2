// Package redis is a partmap store on Redis, for when one machine is not
// enough. Every key of a partition carries the hash tag {partition-NNN}, so
// a partition lives in one slot of a Redis Cluster and can be changed
// atomically by one Lua script; the partitions spread over the masters.
//
// Locks live in Redis too, with a random token and a time to live, so that
// several partmap servers on one Redis serialise their writes to each
// partition: the commit script refuses to write unless the caller still
// holds the partition's lock.
package redis

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/directory"
	"github.com/partmap/partmap/internal/engine"
	"github.com/partmap/partmap/internal/record"
)

// SchemaVersion is the key layout this code reads and writes.
const SchemaVersion = 2 // 2 added secondary indexes; 1 has none

// Options configure Open. A nil *Options means the defaults.
type Options struct {
	// LockWait is how long a write waits for its partition lock; a negative
	// value fails at once. 0 means directory.DefaultLockWait.
	LockWait time.Duration
	// LockTTL bounds how long a lock outlives a server that died holding
	// it, or a release lost in a failover. 0 means 5 s.
	LockTTL time.Duration
	// Limits bounds profiles; nil means partmap.DefaultLimits.
	Limits *partmap.Limits
	// MinReplicasAck makes every commit WAIT until this many replicas have
	// acknowledged it, for up to ReplicaAckTimeout (0 means 1 s); a commit
	// that gets fewer is applied on the master but answered as unavailable.
	// Replication stays asynchronous: see DESIGN.md for what it can lose.
	MinReplicasAck    int
	ReplicaAckTimeout time.Duration
	// Namespace lets several directories share one Redis: it goes into
	// every key, after the partition's hash tag. "" is the default directory.
	Namespace string
	// Indexes are the fields a new directory indexes for search; nil means
	// partmap.DefaultIndexes and an empty slice none. An existing directory
	// keeps its own, and refuses a non-nil Indexes that differs.
	Indexes []string
}

// Store is a customer directory in Redis.
type Store struct {
	*directory.Directory
	client goredis.UniversalClient
}

var (
	_ partmap.Store      = (*Store)(nil)
	_ engine.BatchGetter = (*backend)(nil)
)

// Open uses client for the directory, creating its metadata when there is
// none and refusing metadata of another partition count or a newer schema.
func Open(ctx context.Context, client goredis.UniversalClient, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	switch {
	case o.LockWait == 0:
		o.LockWait = directory.DefaultLockWait
	case o.LockWait < 0:
		o.LockWait = 0
	}
	if o.LockTTL == 0 {
		o.LockTTL = 5 * time.Second
	}
	if o.ReplicaAckTimeout == 0 {
		o.ReplicaAckTimeout = time.Second
	}
	b := &backend{client: client, ttl: o.LockTTL, ns: o.Namespace, acks: o.MinReplicasAck, ackTimeout: o.ReplicaAckTimeout}
	meta, err := b.openMeta(ctx, o.Indexes)
	if err != nil {
		return nil, err
	}
	b.indexes = meta.Indexes
	d := directory.New(nil, 0, directory.Options{LockWait: o.LockWait, Limits: o.Limits, Indexes: meta.Indexes,
		Spaces: &spaces{base: *b}, Meta: &meta})
	// After a crash in the middle of a resize, carry on with it.
	if err := d.ResumeResize(); err != nil {
		return nil, err
	}
	return &Store{Directory: d, client: client}, nil
}

// Close closes the client.
func (s *Store) Close() error {
	s.Directory.Close() // a resize in progress stops, to resume at the next open
	return s.client.Close()
}

type backend struct {
	client     goredis.UniversalClient
	indexes    []string // the indexed fields, in the metadata's order
	ttl        time.Duration
	ns         string // the directory's namespace
	acks       int
	ackTimeout time.Duration
	// spaces are the layout versions the backend serves: the current one,
	// then the next during a resize, whose partitions are numbered on
	// after the current's.
	spaces []space
}

// space is one layout version: its partition count and the namespace its
// keys carry, NS for version 0 and NS@V for version V.
type space struct {
	version int
	n       int
	ns      string
	// accept lists (",a,b,") the state marks (see stateKey) under which
	// this backend may write the space: none for a version alone; none or
	// "resizing" for the current version during a resize (a writer that
	// writes both versions is safe before the marks are all set). Another
	// mark means the layout changed under this server, which must reload.
	accept string
}

func spaceNS(ns string, version int) string {
	if version == 0 {
		return ns
	}
	return ns + "@" + strconv.Itoa(version)
}

// Size is the space's partition count.
func (s space) Size() int { return s.n }

// at maps a partition number to its space and its number there.
func (b *backend) at(p partmap.Partition) (*space, partmap.Partition) {
	i, lp := directory.SpaceOf(b.spaces, p)
	if i == len(b.spaces) {
		panic(fmt.Sprintf("redis: partition number beyond the backend's %d spaces", len(b.spaces)))
	}
	return &b.spaces[i], lp
}

func (b *backend) cur() *space { return &b.spaces[0] }

// Keys. A partition's keys start with its hash tag, before anything else:
// the namespace and the email may themselves contain braces.
func (b *backend) metaKey() string { return "partmap:" + b.ns + ":meta" }
func (b *backend) key(p partmap.Partition) string {
	sp, lp := b.at(p)
	return "{" + lp.String() + "}:" + sp.ns + ":"
}

// stateKey marks a partition of a version that a resize is replacing
// ("resizing") or has replaced ("retired"), so that a server that has not
// noticed the resize cannot write, or read, the wrong version.
func (b *backend) stateKey(p partmap.Partition) string  { return b.key(p) + "state" }
func (b *backend) lockKey(p partmap.Partition) string   { return b.key(p) + "lock" }
func (b *backend) countKey(p partmap.Partition) string  { return b.key(p) + "count" }
func (b *backend) emailsKey(p partmap.Partition) string { return b.key(p) + "emails" }
func (b *backend) recordKey(p partmap.Partition, e string) string {
	return b.key(p) + "r:" + e
}

// indexKey is the sorted set of one indexed field's entries in p. Its
// members are indexMember(value, email), all with score 0, so that they
// sort by value, then email.
func (b *backend) indexKey(p partmap.Partition, field int) string {
	return b.key(p) + "x:" + strconv.Itoa(field)
}

// indexMember prefixes the value with its length (4 bytes, big-endian), so
// that one value's members are exactly those that start with its prefix,
// whatever bytes the value holds; the email (ASCII) follows.
func indexMember(value, email string) string {
	return valuePrefix(value) + email
}

func valuePrefix(value string) string {
	return string(binary.BigEndian.AppendUint32(nil, uint32(len(value)))) + value
}

func (b *backend) openMeta(ctx context.Context, indexes []string) (engine.Meta, error) {
	chosen, err := directory.ChooseIndexes(indexes, true, nil)
	if err != nil {
		return engine.Meta{}, err
	}
	fresh := engine.NewMeta(SchemaVersion, partmap.DefaultPartitions, chosen)
	v, _ := json.Marshal(fresh)
	// SET NX: of several servers opening a new directory at once, one
	// writes the metadata and all read the same.
	created, err := b.client.SetNX(ctx, b.metaKey(), v, 0).Result()
	if err != nil {
		return engine.Meta{}, unavailable(err)
	}
	meta, err := b.Meta(ctx)
	if err != nil {
		return meta, err
	}
	switch {
	case meta.Schema > SchemaVersion:
		return meta, fmt.Errorf("redis: written by a newer partmap (schema %d; this one reads %d)", meta.Schema, SchemaVersion)
	case meta.Schema < 1 || len(meta.CursorKey) == 0:
		return meta, fmt.Errorf("redis: the key %s is not partmap's metadata", b.metaKey())
	case meta.Partitions < 1:
		return meta, fmt.Errorf("redis: the key %s is not partmap's metadata", b.metaKey())
	}
	if meta.Indexes, err = directory.ChooseIndexes(indexes, created, meta.Indexes); err != nil {
		return meta, fmt.Errorf("redis: %w", err)
	}
	return meta, nil
}

func (b *backend) Meta(ctx context.Context) (engine.Meta, error) {
	var meta engine.Meta
	v, err := b.client.Get(ctx, b.metaKey()).Bytes()
	if err != nil {
		return meta, unavailable(err)
	}
	if err := json.Unmarshal(v, &meta); err != nil {
		return meta, fmt.Errorf("redis: corrupt metadata: %w", err)
	}
	return meta, nil
}

var startScript = goredis.NewScript(`
local meta = cjson.decode(redis.call('GET', KEYS[1]))
if meta.started then return 0 end
meta.started = true
redis.call('SET', KEYS[1], cjson.encode(meta))
return 1`)

func (b *backend) Start(ctx context.Context) (bool, error) {
	n, err := startScript.Run(ctx, b.client, []string{b.metaKey()}).Int()
	return n == 1, unavailable(err)
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

// lease is a set of partition locks held under one token.
type lease struct {
	b     *backend
	token string
	parts []partmap.Partition
}

var releaseScript = goredis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

func (l *lease) Release() {
	// A release lost to a failing Redis only leaves the lock to its TTL, so
	// it is not worth waiting long for.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, p := range l.parts {
		// Only the owner deletes a lock: after its TTL it may be somebody else's.
		releaseScript.Run(ctx, l.b.client, []string{l.b.lockKey(p)}, l.token)
	}
	l.parts = nil
}

// Lock takes the partitions' locks in order, polling a held one until wait
// has passed.
func (b *backend) Lock(ctx context.Context, partitions []partmap.Partition, wait time.Duration) (engine.Lease, error) {
	return b.lock(ctx, partitions, wait, b.ttl)
}

func (b *backend) lock(ctx context.Context, partitions []partmap.Partition, wait, ttl time.Duration) (*lease, error) {
	raw := make([]byte, 16)
	rand.Read(raw)
	l := &lease{b: b, token: hex.EncodeToString(raw)}
	deadline := time.Now().Add(wait)
	for _, p := range sortedUnique(partitions) {
		for backoff := time.Millisecond; ; backoff = min(2*backoff, 20*time.Millisecond) {
			ok, err := b.client.SetNX(ctx, b.lockKey(p), l.token, ttl).Result()
			if err != nil {
				l.Release()
				return nil, unavailable(err)
			}
			if ok {
				l.parts = append(l.parts, p)
				break
			}
			remaining := time.Until(deadline)
			if remaining <= 0 {
				l.Release()
				return nil, partmap.Errorf(partmap.ELOCKCONFLICT, "%s is locked by another writer; retry the request", p)
			}
			select {
			case <-ctx.Done():
				l.Release()
				return nil, ctx.Err()
			case <-time.After(min(backoff, remaining)):
			}
		}
	}
	return l, nil
}

func sortedUnique(ps []partmap.Partition) []partmap.Partition {
	ps = slices.Clone(ps)
	slices.Sort(ps)
	return slices.Compact(ps)
}

// spaceIndex is 0 for the current version's partitions, 1 for the next's.
func (b *backend) spaceIndex(p partmap.Partition) int {
	i, _ := directory.SpaceOf(b.spaces, p)
	return i
}

// checkCurrent refuses, as stale, a listing of a version another server's
// resize has retired (and dropped).
func (b *backend) checkCurrent(ctx context.Context) error {
	state, err := b.client.Get(ctx, b.stateKey(0)).Result()
	switch {
	case errors.Is(err, goredis.Nil):
		return nil
	case err != nil:
		return unavailable(err)
	case state == directory.StateRetired:
		return directory.ErrStale
	}
	return nil
}

// Get reads the record and the partition's state in one MGET (one slot):
// a retired version must not answer for the one that replaced it.
func (b *backend) Get(ctx context.Context, p partmap.Partition, email string) (partmap.Record, bool, error) {
	vals, err := b.client.MGet(ctx, b.recordKey(p, email), b.stateKey(p)).Result()
	if err != nil {
		return partmap.Record{}, false, unavailable(err)
	}
	if state, _ := vals[1].(string); state == directory.StateRetired {
		return partmap.Record{}, false, directory.ErrStale
	}
	v, ok := vals[0].(string)
	if !ok {
		return partmap.Record{}, false, nil
	}
	rec, err := record.Decode([]byte(v))
	if err != nil {
		return partmap.Record{}, false, fmt.Errorf("%s %s: %w", p, email, err)
	}
	return rec, true, nil
}

// GetBatch reads records of one partition and its state in one MGET, one
// round trip instead of one per record.
func (b *backend) GetBatch(ctx context.Context, p partmap.Partition, emails []string) ([]*partmap.Record, error) {
	recs, extra, err := b.mgetRecords(ctx, p, emails, b.stateKey(p))
	if err != nil {
		return nil, err
	}
	if state, _ := extra[0].(string); state == directory.StateRetired {
		return nil, directory.ErrStale
	}
	return recs, nil
}

// mgetRecords reads the records of emails in p, nil where absent, and the
// values of extra keys of p's slot, in one MGET.
func (b *backend) mgetRecords(ctx context.Context, p partmap.Partition, emails []string, extra ...string) ([]*partmap.Record, []any, error) {
	keys := make([]string, 0, len(emails)+len(extra))
	for _, e := range emails {
		keys = append(keys, b.recordKey(p, e))
	}
	vals, err := b.client.MGet(ctx, append(keys, extra...)...).Result()
	if err != nil {
		return nil, nil, unavailable(err)
	}
	out := make([]*partmap.Record, len(emails))
	for i, v := range vals[:len(emails)] {
		s, ok := v.(string)
		if !ok {
			continue
		}
		rec, err := record.Decode([]byte(s))
		if err != nil {
			return nil, nil, fmt.Errorf("%s %s: %w", p, emails[i], err)
		}
		out[i] = &rec
	}
	return out, vals[len(emails):], nil
}

// commitScript applies one partition's writes and their index changes if,
// and only if, the caller still holds the partition's lock and knows the
// partition's state (see stateKey). KEYS: lock, count, emails, state, one
// record key per write, then one index key per index change. ARGV: token,
// the number of writes, the states the caller accepts (",a,b,"), then per write:
// email, value ("" to delete), existed ("1" or "0"); then per index change:
// "+" or "-" and the member.
var commitScript = goredis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('PARTMAP_LOCK_LOST')
end
local state = redis.call('GET', KEYS[4]) or ''
if not string.find(ARGV[3], ',' .. state .. ',', 1, true) then
  return redis.error_reply('PARTMAP_STALE ' .. state)
end
local writes = tonumber(ARGV[2])
local delta = 0
for w = 1, writes do
  local k, a = 4 + w, 4 + (w - 1) * 3
  local email, value, existed = ARGV[a], ARGV[a + 1], ARGV[a + 2]
  if value == '' then
    redis.call('DEL', KEYS[k])
    redis.call('ZREM', KEYS[3], email)
    if existed == '1' then delta = delta - 1 end
  else
    redis.call('SET', KEYS[k], value)
    redis.call('ZADD', KEYS[3], 0, email)
    if existed == '0' then delta = delta + 1 end
  end
end
for k = 5 + writes, #KEYS do
  local a = 4 + writes * 3 + (k - 5 - writes) * 2
  if ARGV[a] == '+' then
    redis.call('ZADD', KEYS[k], 0, ARGV[a + 1])
  else
    redis.call('ZREM', KEYS[k], ARGV[a + 1])
  end
end
if delta ~= 0 then
  if redis.call('INCRBY', KEYS[2], delta) <= 0 then redis.call('DEL', KEYS[2]) end
end
return 1`)

// Commit runs one script per partition. The directory's writes each touch
// one partition, so each is atomic; Redis Cluster cannot make one script
// span slots, so a whole-map invocation commits partition by partition.
func (b *backend) Commit(ctx context.Context, l engine.Lease, writes []engine.Write) (func() error, error) {
	lease := l.(*lease)
	byPartition := map[partmap.Partition][]engine.Write{}
	var order []partmap.Partition
	for _, w := range writes {
		if _, ok := byPartition[w.Partition]; !ok {
			order = append(order, w.Partition)
		}
		byPartition[w.Partition] = append(byPartition[w.Partition], w)
	}
	// The next version first: a crash between the two leaves the write in
	// the next version only, where it is an unacknowledged write that
	// landed; the current version's copy is the one reads see, and the
	// next write of the profile rewrites both.
	slices.SortStableFunc(order, func(x, y partmap.Partition) int { return b.spaceIndex(y) - b.spaceIndex(x) })
	for i, p := range order {
		sp, _ := b.at(p)
		keys := []string{b.lockKey(p), b.countKey(p), b.emailsKey(p), b.stateKey(p)}
		args := []any{lease.token, len(byPartition[p]), sp.accept}
		var indexKeys []string
		var indexArgs []any
		for _, w := range byPartition[p] {
			keys = append(keys, b.recordKey(p, w.Email))
			value := ""
			if w.Record != nil {
				value = string(record.Encode(*w.Record))
			}
			existed := "0"
			if w.Existed {
				existed = "1"
			}
			args = append(args, w.Email, value, existed)
			remove, add := directory.IndexChanges(b.indexes, w)
			for _, e := range remove {
				indexKeys = append(indexKeys, b.indexKey(p, e.Field))
				indexArgs = append(indexArgs, "-", indexMember(e.Value, e.Email))
			}
			for _, e := range add {
				indexKeys = append(indexKeys, b.indexKey(p, e.Field))
				indexArgs = append(indexArgs, "+", indexMember(e.Value, e.Email))
			}
		}
		keys = append(keys, indexKeys...)
		args = append(args, indexArgs...)
		if err := b.run(ctx, keys, args); err != nil {
			if i > 0 {
				// An earlier partition's script has written: the outcome is
				// not "nothing was written" any more.
				return nil, &partmap.Error{Code: partmap.EUNAVAILABLE, Err: err,
					Message: fmt.Sprintf("the write reached only part of its partitions (%s failed: %v); its outcome is unknown, read before retrying", p, err)}
			}
			if strings.Contains(err.Error(), "PARTMAP_LOCK_LOST") {
				return nil, partmap.Errorf(partmap.ELOCKCONFLICT, "the lock of %s expired before the commit; nothing was written, retry", p)
			}
			if strings.Contains(err.Error(), "PARTMAP_STALE") {
				return nil, directory.ErrStale
			}
			return nil, unavailable(err)
		}
	}
	return func() error { return nil }, nil
}

// run runs the commit script; with MinReplicasAck, it sends WAIT on the
// same connection to the partition's master, since WAIT counts the
// acknowledgements of that connection's own writes.
func (b *backend) run(ctx context.Context, keys []string, args []any) error {
	if b.acks == 0 {
		return commitScript.Run(ctx, b.client, keys, args...).Err()
	}
	var node *goredis.Client
	switch c := b.client.(type) {
	case *goredis.ClusterClient:
		var err error
		if node, err = c.MasterForKey(ctx, keys[0]); err != nil {
			return err
		}
	case *goredis.Client:
		node = c
	default:
		return fmt.Errorf("redis: replica acknowledgements need a client or a cluster client, not %T", b.client)
	}
	pipe := node.Pipeline()
	eval := commitScript.Eval(ctx, pipe, keys, args...)
	wait := pipe.Do(ctx, "WAIT", b.acks, b.ackTimeout.Milliseconds())
	if _, err := pipe.Exec(ctx); err != nil {
		if eval.Err() != nil {
			return eval.Err()
		}
		return err
	}
	if n, err := wait.Int(); err != nil || n < b.acks {
		return &partmap.Error{Code: partmap.EUNAVAILABLE, Err: err,
			Message: fmt.Sprintf("the write was applied but only %d of the %d required replicas acknowledged it in %v", n, b.acks, b.ackTimeout)}
	}
	return nil
}

// Scan reads partitions in order, each in email order from its sorted set.
func (b *backend) Scan(ctx context.Context, after *directory.Position, end partmap.Partition, limit int) ([]directory.Item, error) {
	if err := b.checkCurrent(ctx); err != nil {
		return nil, err
	}
	var items []directory.Item
	first := partmap.Partition(0)
	if after != nil {
		first = after.Partition
	}
	for p := first; p < end && len(items) < limit; p++ {
		min := "-"
		if after != nil && p == after.Partition {
			min = "(" + after.Email
		}
		for len(items) < limit {
			count := limit - len(items)
			emails, err := b.client.ZRangeByLex(ctx, b.emailsKey(p), &goredis.ZRangeBy{Min: min, Max: "+", Count: int64(count)}).Result()
			if err != nil {
				return nil, unavailable(err)
			}
			if len(emails) == 0 {
				break
			}
			found, err := b.readRecords(ctx, p, emails)
			if err != nil {
				return nil, err
			}
			items = append(items, found...)
			// A full batch thinned by deletions may leave more in p.
			if len(emails) < count {
				break
			}
			min = "(" + emails[len(emails)-1]
		}
	}
	return items, nil
}

// readRecords reads the records of emails in p with one MGET (one slot),
// leaving out those deleted since their emails were read.
func (b *backend) readRecords(ctx context.Context, p partmap.Partition, emails []string) ([]directory.Item, error) {
	recs, _, err := b.mgetRecords(ctx, p, emails)
	if err != nil {
		return nil, err
	}
	var items []directory.Item
	for i, rec := range recs {
		if rec != nil { // nil: deleted between the two reads
			items = append(items, directory.Item{Position: directory.Position{Partition: p, Email: emails[i]}, Record: *rec})
		}
	}
	return items, nil
}

// Counts reads every partition's count key in one pipeline.
func (b *backend) Counts(ctx context.Context) ([]partmap.PartitionCount, error) {
	if err := b.checkCurrent(ctx); err != nil {
		return nil, err
	}
	pipe := b.client.Pipeline()
	cmds := make([]*goredis.StringCmd, b.cur().n)
	for p := range cmds {
		cmds[p] = pipe.Get(ctx, b.countKey(partmap.Partition(p)))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
		return nil, unavailable(err)
	}
	var out []partmap.PartitionCount
	for p, c := range cmds {
		n, err := c.Result()
		if errors.Is(err, goredis.Nil) {
			continue
		}
		count, perr := strconv.ParseInt(n, 10, 64)
		if err != nil || perr != nil {
			return nil, fmt.Errorf("redis: count of %s: %v %v", partmap.Partition(p), err, perr)
		}
		out = append(out, partmap.PartitionCount{Partition: partmap.Partition(p), Profiles: count})
	}
	return out, nil
}
