package partmap

import (
	"context"
	"time"
)

// Feeder is a store that publishes its changes: every committed change to a
// profile gets a position in the change feed in the same atomic commit as
// the change itself. Pebble, Redis and the HTTP client are Feeders.
type Feeder interface {
	// Changes returns a page of the feed after q.After, oldest first,
	// waiting up to q.Wait for the first change when there is none yet.
	// Order is total per profile and per partition; delivery is at least
	// once: a consumer that resumes from a Next (or a Change's Cursor) it
	// saved misses nothing. A reader that wants only what is there now
	// reads on until a page is CaughtUp. A cursor older than the feed's
	// retention is ECURSOREXPIRED, never a silent gap; one this store did
	// not issue is EINVALID.
	Changes(ctx context.Context, q ChangeQuery) (ChangePage, error)
}

// ChangeQuery selects a page of the change feed.
type ChangeQuery struct {
	// After is where to resume: a Next or a Change's Cursor. "" starts at
	// the oldest change retained; FeedNow at the newest, so that only
	// changes committed later are returned.
	After string
	Limit int           // at most this many changes (1 to MaxChangesPage); 0 means DefaultChangesPage
	Wait  time.Duration // long-poll: how long to wait for a change when none is ready (at most MaxChangesWait)

	// Only the changes of profiles whose partition, in the current layout,
	// is from From up to (not including) To; To 0 means the last.
	From, To Partition
	// Only the changes of this profile (any spelling; canonicalised).
	Email string
}

// FeedNow is the cursor of the feed's newest change, whatever it is.
const FeedNow = "now"

// Limits of ChangeQuery.
const (
	DefaultChangesPage = 1000
	MaxChangesPage     = 10000
	MaxChangesWait     = 5 * time.Minute
)

// ChangePage is one page of the change feed.
type ChangePage struct {
	Changes []Change
	// Next resumes after this page. It may move on when Changes is empty:
	// past changes the filters left out, and on Redis with the clock (to
	// the horizon the read reached). Cursors are the store's own: compare
	// none, not even with the After they came from; ask CaughtUp.
	Next string
	// CaughtUp says the page reached the end of the feed as of its read:
	// every change acknowledged before the call is on it or behind After.
	// A page that is not may be empty (a filter passed over many changes
	// it left out, or the store could not yet see to its end); read on
	// from Next.
	CaughtUp bool
}

// Change is one committed change to one profile.
type Change struct {
	Cursor string    // resumes after this change
	Time   time.Time // when it was committed, to the millisecond
	// Op is what changed the profile: an operation kind (OpPut for a
	// create or replace, OpPatch, OpRename on both emails, ...), the
	// transaction's last operation on the profile, or OpExpired when the
	// expiry sweeper reclaimed it.
	Op     OpKind
	Email  string  // canonical
	Record *Record // the profile after the change, version and deadlines included; nil when deleted
}

// OpExpired is the Change.Op of the expiry sweeper: a profile that ended
// (its deadline, or its last field's, passed: Record.End) is deleted, or a
// record loses the fields whose deadlines passed. No operation has this
// kind.
const OpExpired OpKind = "expired"

// Deleted says the change removed the profile.
func (c Change) Deleted() bool { return c.Record == nil }
