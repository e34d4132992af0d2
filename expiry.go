package partmap

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Deadlines say when a profile and its fields expire, in Unix milliseconds,
// the unit Redis keeps them in. From its deadline on, an expired field or
// profile is gone: no read shows it, and the sweeper reclaims it.
type Deadlines struct {
	Profile int64            // 0: the profile itself never expires
	Fields  map[string]int64 // a field not named never expires
}

// DeadlineCounter is a store that counts its profiles with deadlines, as
// Redis's INFO keyspace does (expires= and subexpiry=): Pebble and Redis
// are. The HTTP API has no such route.
type DeadlineCounter interface {
	// CountDeadlines counts from the expiry entries alone, never reading
	// a record: its cost grows with the profiles that have deadlines, not
	// with the directory.
	CountDeadlines(ctx context.Context) (DeadlineCounts, error)
}

// DeadlineCounts count the live profiles that have deadlines. A profile
// whose field deadline has passed counts until the sweeper rewrites it,
// as Redis counts a hash until it deletes the expired field.
type DeadlineCounts struct {
	Ending      int64 // profiles that end at a deadline (Record.End): their own, or their last field's
	FieldExpiry int64 // profiles with a deadline on one field or more
}

// IsZero reports that nothing expires.
func (d Deadlines) IsZero() bool { return d.Profile == 0 && len(d.Fields) == 0 }

// Clone returns a copy that shares nothing with d.
func (d Deadlines) Clone() Deadlines {
	c := Deadlines{Profile: d.Profile}
	if len(d.Fields) > 0 {
		c.Fields = make(map[string]int64, len(d.Fields))
		for k, v := range d.Fields {
			c.Fields[k] = v
		}
	}
	return c
}

// Earliest returns the soonest deadline of the profile's fields, 0 when
// none expires.
func (d Deadlines) Earliest() int64 {
	var min int64
	for _, at := range d.Fields {
		if min == 0 || at < min {
			min = at
		}
	}
	return min
}

// Check reports whether d can be written with profile p, as an import
// writes an exported record's: the profile's deadline 1 ms after the epoch
// or later, each field's from 1 ms to MaxFieldDeadline and on a field of p
// other than the email (EKEYFIELD). A deadline that has passed is allowed:
// it expires at once.
func (d Deadlines) Check(p Profile) error {
	if d.Profile < 0 {
		return &Error{Code: EINVALID, Message: fmt.Sprintf("the profile's deadline %d is before the epoch", d.Profile)}
	}
	for name, at := range d.Fields {
		switch _, ok := p[name]; {
		case name == FieldEmail:
			return &Error{Code: EKEYFIELD, Field: name, Message: "emailAddress is the profile's key and cannot expire"}
		case !ok:
			return &Error{Code: EINVALID, Field: name, Message: fmt.Sprintf("field %q has a deadline but is not in the profile", name)}
		case at < 1 || at > MaxFieldDeadline:
			return &Error{Code: EINVALID, Field: name, Message: fmt.Sprintf("the deadline %d of field %q is not from 1 to %d ms after the epoch", at, name, int64(MaxFieldDeadline))}
		}
	}
	return nil
}

// MaxFieldDeadline is the latest deadline of a field: Redis's bound on a
// field's expiry time (HFE_MAX_ABS_TIME_MSEC), (2^48-1)/4 ms after the
// epoch, in the year 4199. A profile's deadline may be as late as Unix
// milliseconds in an int64 go, as a Redis key's.
const MaxFieldDeadline = (1<<48 - 1) >> 2

// ErrDeadlineTooLate is the cause (Error.Err) of the refusal of a time past
// the latest deadline (EINVALID), for a door that words it its own way.
var ErrDeadlineTooLate = errors.New("partmap: a deadline past the latest one")

// Live returns the record as it is at now (Unix ms): without the fields
// whose deadline has passed, and with ok false when the profile has ended
// (End). A deadline passes at its instant: a field due at now
// is gone at now.
//
// A record that lost fields gets a new version, derived from its own and
// from each deadline that passed, in order. The sweeper writes exactly that
// version when it reclaims the fields, so an ETag is the same whether a
// reader meets the expired fields still stored or already swept, and
// changes when what a reader sees changes.
func (r Record) Live(now int64) (Record, bool) {
	d := r.Deadlines
	if d.IsZero() {
		return r, true
	}
	if end := r.End(); end != 0 && end <= now {
		return Record{}, false
	}
	if len(d.Fields) == 0 {
		return r, true
	}
	var passed []int64
	for _, at := range d.Fields {
		if at <= now {
			passed = append(passed, at)
		}
	}
	if len(passed) == 0 {
		return r, true
	}
	slices.Sort(passed)
	passed = slices.Compact(passed)
	live := Record{Profile: r.Profile.Clone(), Version: r.Version, Deadlines: d.Clone(), Committed: r.Committed}
	for name, at := range d.Fields {
		if at <= now {
			delete(live.Profile, name)
			delete(live.Deadlines.Fields, name)
		}
	}
	if len(live.Deadlines.Fields) == 0 {
		live.Deadlines.Fields = nil
	}
	for _, at := range passed {
		live.Version = expiredVersion(live.Version, at)
	}
	return live, true
}

// End is when the profile itself stops existing, in Unix ms (0: never):
// its own deadline, or, when every field but emailAddress has one, the
// last of theirs, if sooner. A profile left with its key alone is gone, as
// Redis deletes a hash whose last field expires.
func (r Record) End() int64 {
	end := r.Deadlines.Profile
	if len(r.Deadlines.Fields) == 0 {
		return end
	}
	var last int64
	for name := range r.Profile {
		if name == FieldEmail {
			continue
		}
		at, expires := r.Deadlines.Fields[name]
		if !expires {
			return end // a field that stays keeps the profile
		}
		last = max(last, at)
	}
	if last != 0 && (end == 0 || last < end) {
		end = last
	}
	return end
}

// expiredVersion is the version a record at v has once the fields due at
// deadline are gone: a mix of the two (splitmix64's finaliser), never 0.
func expiredVersion(v Version, deadline int64) Version {
	x := uint64(v) ^ uint64(deadline)*0x9e3779b97f4a7c15
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	if x == 0 {
		x = 1
	}
	return Version(x)
}

// ExpireCondition makes setting a deadline conditional, as the NX, XX, GT
// and LT options of Redis's HEXPIRE and EXPIRE do. A field or profile
// without a deadline counts as one infinitely far off: GT never sets one
// on it, LT always does.
type ExpireCondition string

const (
	ExpireAlways   ExpireCondition = ""
	ExpireIfNone   ExpireCondition = "NX" // only where there is no deadline
	ExpireIfSet    ExpireCondition = "XX" // only where there is one
	ExpireIfLater  ExpireCondition = "GT" // only when the new one is later
	ExpireIfSooner ExpireCondition = "LT" // only when the new one is sooner
	// ExpireIfSetSooner is Redis's XX and LT together: only where there
	// is one, and the new one is sooner.
	ExpireIfSetSooner ExpireCondition = "XX LT"
)

// ParseExpireCondition reads NX, XX, GT, LT or XX LT, in any case, or "".
func ParseExpireCondition(s string) (ExpireCondition, error) {
	switch c := ExpireCondition(upperASCII(s)); c {
	case ExpireAlways, ExpireIfNone, ExpireIfSet, ExpireIfLater, ExpireIfSooner, ExpireIfSetSooner:
		return c, nil
	}
	return "", &Error{Code: EINVALID, Field: "condition", Message: fmt.Sprintf("condition %q is not NX, XX, GT, LT or XX LT", s)}
}

// Allows reports whether the condition lets a deadline at next replace
// current (0: none).
func (c ExpireCondition) Allows(current, next int64) bool {
	switch c {
	case ExpireIfNone:
		return current == 0
	case ExpireIfSet:
		return current != 0
	case ExpireIfLater:
		return current != 0 && next > current
	case ExpireIfSooner:
		return current == 0 || next < current
	case ExpireIfSetSooner:
		return current != 0 && next < current
	}
	return true
}

func upperASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// When is a deadline as a caller gives it: an absolute time, or a time to
// live counted from the store's clock, so that a client's clock does not
// matter. Both are in milliseconds; a caller that counts in seconds
// multiplies (Seconds, At).
type When struct {
	Millis   int64 // Unix milliseconds, or with Relative, milliseconds from now
	Relative bool
}

// In is a deadline d from the store's now.
func In(d time.Duration) When { return When{Millis: d.Milliseconds(), Relative: true} }

// At is a deadline at t.
func At(t time.Time) When { return When{Millis: t.UnixMilli()} }

// WhenFromParam reads a time as EXPIRE, HEXPIRE and their siblings take
// it: n seconds or milliseconds, relative or absolute, never negative,
// and at most latest once in milliseconds (op.LatestDeadline), a relative
// one again once the store's clock resolves it. param names the parameter
// in errors.
func WhenFromParam(param string, n int64, seconds, relative bool, latest int64) (When, error) {
	if n < 0 {
		return When{}, &Error{Code: EINVALID, Field: param, Message: fmt.Sprintf("%s is %d; a time must not be negative", param, n)}
	}
	if seconds {
		if n > latest/1000 {
			return When{}, tooLate(param, n, latest)
		}
		n *= 1000
	}
	if n > latest {
		return When{}, tooLate(param, n, latest)
	}
	return When{Millis: n, Relative: relative}, nil
}

func tooLate(param string, n, latest int64) error {
	return &Error{Code: EINVALID, Field: param, Err: ErrDeadlineTooLate,
		Message: fmt.Sprintf("%s %d is past the latest deadline (%d ms after the epoch)", param, n, latest)}
}

// Resolve turns w into Unix milliseconds at now, refusing a negative time
// and a deadline past latest.
func (w When) Resolve(now, latest int64) (int64, error) {
	switch {
	case w.Millis < 0:
		return 0, &Error{Code: EINVALID, Field: "time", Message: fmt.Sprintf("a time of %d ms is negative", w.Millis)}
	case w.Relative && w.Millis > latest-now, !w.Relative && w.Millis > latest:
		return 0, tooLate("time", w.Millis, latest)
	case w.Relative:
		return now + w.Millis, nil
	}
	return w.Millis, nil
}

// LatestDeadline is the latest deadline op may set: a profile's expire may
// set any, a field's MaxFieldDeadline.
func (op Operation) LatestDeadline() int64 {
	if op.Op == OpExpire && len(op.Fields) == 0 {
		return math.MaxInt64
	}
	return MaxFieldDeadline
}

// Replies of the expiry calls, Redis's codes.
const (
	ExpiryNoField = -2 // no such field (HEXPIRE, HTTL, HPERSIST): or, for TTL, no such profile
	ExpiryNone    = -1 // the field or profile has no deadline (HTTL, HPERSIST)
	ExpiryNotMet  = 0  // the NX, XX, GT or LT condition did not hold
	ExpirySet     = 1  // the deadline is set (HPERSIST: removed)
	ExpiryDeleted = 2  // the deadline was now or past: the field is deleted
)

// TTLs answers Store.Deadlines: the profile's deadline and, for each
// field asked, one in Unix ms, or ExpiryNone or ExpiryNoField; and the
// store's clock when it read them, so that a caller can turn them into
// times to live as TTL and HTTL do.
type TTLs struct {
	Profile   int64 // the profile's deadline, or ExpiryNone
	Deadlines []int64
	Now       int64
	Version   Version
}

// TTL turns a deadline of t into milliseconds to live, as PTTL and HPTTL
// answer: the codes pass through, and a deadline is never less than 0.
func (t TTLs) TTL(deadline int64) int64 {
	if deadline < 0 {
		return deadline
	}
	return max(deadline-t.Now, 0)
}

// FieldSetCondition makes HSETEX conditional on the fields it sets.
type FieldSetCondition string

const (
	SetFieldsAlways   FieldSetCondition = ""
	SetIfNoFieldExist FieldSetCondition = "FNX" // only if none of the fields exists
	SetIfAllExist     FieldSetCondition = "FXX" // only if all of them exist
)

// FieldExpiry is what HGETEX and HSETEX do to the deadlines of the fields
// they touch: set one (When), remove them (Persist, HGETEX), keep them
// (KeepTTL, HSETEX), or, when all are zero, the command's default: HGETEX
// leaves them, HSETEX clears them as any write of a value does.
type FieldExpiry struct {
	When    *When
	Persist bool
	KeepTTL bool
}
