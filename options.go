package partmap

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// DirectoryOptions are what every store of a customer directory takes,
// whatever keeps it: pebble.Options and redis.Options embed them. A zero
// field means its default; where one can be none or at once, a negative
// one says so.
type DirectoryOptions struct {
	// Partitions is the partition count the caller expects. A new
	// directory is created with it; an existing one with another count is
	// refused. 0 means DefaultPartitions for a new directory, and whatever
	// an existing one has (a resize may have changed it).
	Partitions int
	// LockWait is how long a write waits for its partition lock before it
	// fails with a lock conflict; 0 means DefaultLockWait, and a negative
	// one fails at once, as the original engine does.
	LockWait time.Duration
	// Limits bounds profiles; nil means DefaultLimits.
	Limits *Limits
	// Indexes are the fields a new directory indexes for search; nil means
	// DefaultIndexes and an empty slice none. An existing directory keeps
	// its own, and refuses a non-nil Indexes that differs.
	Indexes []string
	// Clock is the time deadlines are measured against; nil means
	// time.Now. Tests move it.
	Clock func() time.Time
	// SweepInterval is how often the sweeper reclaims expired profiles and
	// fields; 0 means DefaultSweepInterval, and a negative one runs no
	// sweeper (a test calls the store's Sweep itself).
	SweepInterval time.Duration
	// FeedRetention bounds the change feed; nil means DefaultRetention.
	FeedRetention *Retention
	// FeedTrimInterval is how often the feed is trimmed to its retention;
	// 0 means every 10 s, and a negative one never (a test that counts the
	// commands a store sends).
	FeedTrimInterval time.Duration
}

// DefaultLockWait is how long a write waits for its partition lock before it
// fails with a lock conflict, unless told otherwise. See DESIGN.md for why it
// is not zero.
const DefaultLockWait = 50 * time.Millisecond

// DefaultSweepInterval is how often the sweeper looks for what has
// expired, unless told otherwise: when nothing is due, a look is one seek
// on Pebble and one read of its hints on Redis.
const DefaultSweepInterval = 500 * time.Millisecond

// SweepStats is what one pass of the expiry sweeper reclaimed.
type SweepStats struct {
	Profiles int // expired profiles deleted
	Records  int // records rewritten without their expired fields
}

// Retention bounds the change feed: events older than Age, and all but the
// newest Events, are trimmed. A zero field bounds nothing.
type Retention struct {
	Age    time.Duration
	Events int64
}

// DefaultRetention keeps a day of changes, and at most ten million.
var DefaultRetention = Retention{Age: 24 * time.Hour, Events: 10_000_000}

// FeedStats describe the change feed a store keeps.
type FeedStats struct {
	Events int64 // about how many events it holds
	Bytes  int64 // about how much they take, when the backend knows; else 0
	Oldest int64 // the commit time of the oldest (Unix ms); 0 when empty
}

// ParseRetention reads --feed-retention: a duration ("24h", "7d"), a
// number of changes ("1000000"), both separated by a comma, or "none".
func ParseRetention(s string) (Retention, error) {
	var r Retention
	if s == "none" {
		return r, nil
	}
	bad := func(part string) error {
		return fmt.Errorf("feed retention %q: %q is neither a duration (24h, 7d) nor a number of changes (1000000); write DURATION, COUNT, DURATION,COUNT or none", s, part)
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if n, err := strconv.ParseInt(part, 10, 64); err == nil && n > 0 && r.Events == 0 {
			r.Events = n
			continue
		}
		d, err := time.ParseDuration(part)
		if days, ok := strings.CutSuffix(part, "d"); ok && err != nil {
			var n int64
			if n, err = strconv.ParseInt(days, 10, 64); err == nil && n > 0 && n < 1<<20 {
				d = time.Duration(n) * 24 * time.Hour
			}
		}
		if err != nil || d <= 0 || r.Age != 0 {
			return Retention{}, bad(part)
		}
		r.Age = d
	}
	return r, nil
}

// String writes r as ParseRetention reads it.
func (r Retention) String() string {
	var parts []string
	if r.Age > 0 {
		parts = append(parts, r.Age.String())
	}
	if r.Events > 0 {
		parts = append(parts, strconv.FormatInt(r.Events, 10))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

type noLockWaitKey struct{}

// NoLockWait returns a context under which a write fails with a lock
// conflict at once when its partition is locked, instead of waiting up to
// LockWait for it. A server that runs many clients' commands on one thread
// uses it, so that one busy partition does not stall every client: it
// tries the write again later, and serves the others meanwhile.
func NoLockWait(ctx context.Context) context.Context {
	return context.WithValue(ctx, noLockWaitKey{}, true)
}

// LockWaitOf is how long a write under ctx waits for a locked partition:
// wait, or a negative duration (fail at once) under NoLockWait.
func LockWaitOf(ctx context.Context, wait time.Duration) time.Duration {
	if no, _ := ctx.Value(noLockWaitKey{}).(bool); no {
		return -1
	}
	return wait
}
