package partmap

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// DefaultLockWait is how long a write waits for its partition lock before it
// fails with a lock conflict, unless told otherwise. See DESIGN.md for why it
// is not zero.
const DefaultLockWait = 50 * time.Millisecond

// DefaultSweepInterval is how often the sweeper looks for what has
// expired, unless told otherwise: on Pebble a pass over the expiry entries
// by deadline, one seek when nothing is due; on Redis one read of the
// hints of which partitions hold something due.
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
