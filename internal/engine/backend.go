package engine

import (
	"context"
	"errors"
	"time"

	"github.com/partmap/partmap"
)

// Backend is the contract between the directory and a storage technology:
// the nine methods every backend implements. What only some can do is in
// small interfaces beside it, which the engine looks for once, in New:
// Shared, Feeder, FeedSignaler, ViewReader, Hints and LayoutWatcher. A
// backend stores what it is handed and answers what it is asked; it never
// decides what a write means and never calls back into the engine or the
// directory.
//
// What a backend stores, for every layout generation the directory names:
// partitions of records, each keyed by canonical email; each partition's
// profile count, which exists only while the partition holds a profile; and
// each profile's index entries, in the profile's own partition, so that one
// atomic commit of a partition covers a profile, its count and its entries;
// and, with a Feeder, the change feed, one event per write that names a
// change, in the same atomic commit as the write. Beside them it keeps the
// directory's metadata, as bytes it does not read.
//
// Errors: a backend answers with *partmap.Error values (EUNAVAILABLE when
// the store cannot answer now, ELOCKCONFLICT when a lock stayed busy), or
// with ErrStale; any other error is internal. A missing record, partition
// or count is not an error.
type Backend interface {
	// Get returns the records of emails in part, in order, nil for a
	// missing one. It sees every commit that has returned, durable or not,
	// and answers from one view of the partition: never some records from
	// before a commit and some from after it (a batch lookup relies on it).
	Get(ctx context.Context, part Part, emails []string) ([]*partmap.Record, error)

	// Commit applies writes atomically under lease, the one Shared.Lock
	// returned for their partitions (nil without Shared), however many
	// partitions they span. It returns once they are visible to Get; the
	// returned durable blocks until they survive a crash. Splitting the two
	// lets the engine release its locks before the fsync, so that writers
	// of one partition share syncs. A backend whose commit of several
	// partitions costs many round trips says so (the directory's
	// Options.CommitPerPartition).
	//
	// A backend that checks versions (the directory's Options) also takes
	// writes to one partition with a nil lease, from an engine that took
	// no lock in the store: it then applies them only if nobody holds the
	// partition's lock (else ELOCKCONFLICT) and every written record is
	// still what the writer read (Write.Created, Write.Prev; else
	// ErrChanged), in the same atomic step as the writes.
	Commit(ctx context.Context, lease Lease, writes []Write) (durable func() error, err error)

	// IndexEntries returns every index entry stored in part, whatever its
	// field, for checking.
	IndexEntries(ctx context.Context, part Part) ([]IndexEntry, error)

	Direct
}

// Direct is the part of Backend outside invocations, which the engine
// passes on as it is, as methods of its own: the metadata, reads across
// partitions that lock nothing (listings, counts, exports, the sweeper's
// look for what is due), and the drop of a generation nobody uses.
type Direct interface {
	// Meta returns the stored metadata, nil when there is none. With a
	// non-nil update, it first replaces the metadata with update's result,
	// atomically and durably: concurrent updates are serialised. An update
	// that returns its input unchanged writes nothing; an update's error is
	// returned and writes nothing.
	Meta(ctx context.Context, update func(old []byte) ([]byte, error)) ([]byte, error)

	// Scan returns up to q.Limit profiles of q's generation in enumeration
	// order, from one consistent view of each partition at least.
	Scan(ctx context.Context, q Query) ([]Item, error)

	// Counts returns the profile count of every partition of generation
	// gen from first up to (not including) end that holds a profile, in
	// order.
	Counts(ctx context.Context, gen int, first, end partmap.Partition) ([]partmap.PartitionCount, error)

	// Due returns expiry entries (ExpiryField) of generation gen's
	// partitions from first up to (not including) end whose deadline is
	// before before (Unix ms), up to limit of them, in an order of the
	// backend's choosing (soonest first, or partition by partition), each
	// partition's from one view of it at least. With after, it returns the
	// entries after that one in its order: a sweeper that reclaimed a full
	// page goes on from its last entry instead of stepping again over what
	// it has just deleted. The sweeper and the counts of profiles it has not
	// reclaimed yet read them.
	Due(ctx context.Context, gen int, first, end partmap.Partition, before int64, limit int, after *Due) ([]Due, error)

	// Snapshot freezes layout l for an export: its scans see the
	// generation as it was at one instant, whatever is written meanwhile.
	Snapshot(ctx context.Context, l Layout) (Snapshot, error)

	// Drop deletes every record, count and index entry of layout l, which
	// nobody reads or writes any more. Marks stay, for servers that have
	// not noticed.
	Drop(ctx context.Context, l Layout) error
}

// Shared is a Backend whose store several servers share (Redis): it keeps
// the locks they all take, and marks that keep a server that has not
// noticed a resize off the wrong generation. Without it, one process owns
// the store: the engine's in-process locks are all there are, and its
// serving layout is all the marking it needs.
type Shared interface {
	// Lock takes the locks of parts that other processes sharing the store
	// take too, once the engine holds its own in-process locks of them.
	// parts come sorted, without repeats. A busy lock is retried until wait
	// has passed, then Lock fails with ELOCKCONFLICT holding nothing. The
	// locks are kept until released, however long that is; locks that
	// expire are renewed meanwhile, and a dead holder's go soon.
	//
	// With a name (named.Lease), the locks are the store's rather than the
	// process's: taken under the name, or taken over where already held
	// under it, they last until named.Until without renewal, whether the
	// process lives or not, and any server that takes them over can
	// release them (the whole-map lock). A lapsed name is ENOTFOUND.
	Lock(ctx context.Context, parts []Part, wait time.Duration, named Named) (Lease, error)

	// Mark records stage on every partition of layout l: from then on it
	// refuses a write whose Fence the mark exceeds, and a read of a
	// StageRetired partition, with ErrStale.
	Mark(ctx context.Context, l Layout, stage Stage) error
}

// Feeder is a Backend that keeps the change feed; without it, a read of
// the feed is EUNSUPPORTED.
type Feeder interface {
	// Feed returns up to limit events after the cursor after ("" from the
	// oldest kept), in the feed's order, with the cursor that resumes after
	// them, and whether it read to the feed's end (FeedPage.End). Only
	// events whose commits are durable are returned, and an event is never
	// returned after one that follows it in the feed's order was (no event
	// appears behind a cursor already handed out). The order is total per
	// partition (of whichever generation the event was written in) and per
	// profile, across resizes too; Next may move on when Events is empty.
	// A cursor the backend did not issue is EINVALID; one behind what
	// TrimFeed deleted is ECURSOREXPIRED. partmap.FeedNow answers no
	// events, the cursor of the newest, and End.
	Feed(ctx context.Context, after string, limit int) (FeedPage, error)

	// TrimFeed deletes the events committed before before (Unix ms; 0
	// keeps all) and, when keep > 0, all but about the newest keep, and
	// describes what is left.
	TrimFeed(ctx context.Context, before int64, keep int64) (partmap.FeedStats, error)
}

// LayoutWatcher is a Backend whose own background work needs the layouts
// the directory serves (Redis: the backstop), which the directory hands
// down (Engine.Serve) when it opens and whenever they change.
type LayoutWatcher interface {
	// Serving is told the layouts served now: the current one, then,
	// during a resize, the next.
	Serving(layouts []Layout)
}

// ViewReader is a Backend that can also read several partitions of one
// generation from one view of them all, as a single database can: a
// commit of several partitions (a rename, a transaction) shows in all of
// them or in none. A batch lookup uses it where the backend has it; a
// backend whose commits of several partitions take several steps (Redis)
// cannot offer it cheaply, and its batch lookups read each partition at
// an instant of its own.
type ViewReader interface {
	// GetView returns the records of each read's emails, in order, nil for
	// a missing one, all as they were at one instant, which every commit
	// that returned before the call precedes. The reads name distinct
	// partitions of generation gen.
	GetView(ctx context.Context, gen int, reads []Read) ([][]*partmap.Record, error)
}

// Read names records of one partition, for ViewReader.GetView.
type Read struct {
	Partition partmap.Partition
	Emails    []string
}

// Hints is what a backend may offer besides Backend when a pass over every
// partition costs it a command per partition (Redis), so that background
// work an idle directory does costs it nothing per partition: the backend
// keeps hints of where work is, written by whoever writes there, and the
// directory's sweeper and feed trimmer ask them instead of every
// partition. Hints may be missing for a while (a writer that died before
// it wrote them, a hint lost in a failover): the backend finds those
// again by a slow pass of its own, at a fixed rate. Reads never depend on
// them. A backend whose passes are cheap (Pebble: one seek) offers none.
type Hints interface {
	// ClaimDue claims the partitions, of any generation, that hints say
	// hold an expiry entry due before before, and returns them with their
	// entries due (a page of each, soonest first). A claimed partition's
	// hint is the claimer's until ReleaseDue, or until a lease of some
	// seconds runs out (a claimer that died): no other claimer gets it
	// meanwhile, while writers' new hints stay everybody's.
	ClaimDue(ctx context.Context, before int64) (DueClaim, error)
	// ReleaseDue ends a claim once its sweep is over, whether it reclaimed
	// everything or not: each partition's hint comes back at the soonest
	// deadline the partition holds now, or goes if it holds none. Those in
	// skipped (of a generation the caller does not serve) come back some
	// seconds later at the soonest, so that a server that does serve them
	// sweeps them, and nobody spins on them.
	ReleaseDue(ctx context.Context, c DueClaim, skipped []Part) error
	// TrimWritten trims, as TrimFeed does, the feed's parts that hints say
	// were written, or have aged past before, since they were last
	// trimmed, and describes the whole feed as of each part's last trim.
	TrimWritten(ctx context.Context, before int64, keep int64) (partmap.FeedStats, error)
}

// DueClaim is what Hints.ClaimDue claimed.
type DueClaim struct {
	Token  string // the claimer's, for ReleaseDue
	Before int64  // as claimed
	Parts  []Part
	Due    [][]Due // Due[i]: Parts[i]'s entries due, soonest first
	// More says some partition had more entries due than its page: the
	// caller claims again once it has reclaimed these.
	More bool
}

// Lease is a set of held locks.
type Lease interface {
	// Release frees the locks; calling it again does nothing. An error
	// means a held lock was lost meanwhile (on Redis: a failover, or a
	// stall past its time to live).
	Release() error
}

// Named names a set of locks in the store (Shared.Lock), so that they
// outlive the process that took them; the zero Named names none.
type Named struct {
	Lease string    // the name, a secret: whoever presents it may release them
	Until time.Time // when the locks release themselves
}

// Snapshot is a frozen view of one generation.
type Snapshot interface {
	// Scan is Backend.Scan, over the frozen view; q.Where is empty.
	Scan(ctx context.Context, q Query) ([]Item, error)
	// Close releases the view. An error means it did not stay frozen, so
	// what was read from it is not a consistent snapshot.
	Close() error
}

// Layout is one generation of the directory's partitioning: its number,
// which names its key space, and its partition count. The directory starts
// at generation 0, and each resize makes the next.
type Layout struct {
	Generation int
	Partitions int
}

// Part names one partition of one generation.
type Part struct {
	Generation int
	Partition  partmap.Partition
}

// Compare orders parts by generation, then partition: the order in which
// locks are taken, so that no two invocations deadlock.
func (p Part) Compare(q Part) int {
	switch {
	case p.Generation != q.Generation:
		return p.Generation - q.Generation
	case p.Partition < q.Partition:
		return -1
	case p.Partition > q.Partition:
		return 1
	}
	return 0
}

// Write is one finished change to one profile, for Commit.
type Write struct {
	Part   Part
	Email  string
	Record *partmap.Record // nil deletes the record, which exists
	// Created says the record is new: its partition's count grows by one.
	// A deletion shrinks it by one; a replacement leaves it.
	Created bool
	// Prev is the version of the record the write replaces or deletes, as
	// the writer read it (meaningless when Created). A write keeps a
	// record's version only when it keeps its content (a resize's copy),
	// so a record still at Prev is the record the writer read.
	Prev partmap.Version
	// Remove and Add are the index entries the write takes out and puts
	// in, in Part: those of the indexed fields whose value it changes.
	Remove, Add []IndexEntry
	// Fence is the latest stage the writer knows Part's generation to be
	// in (see Shared.Mark): StageServing, or StageResizing when it writes
	// the next generation in the same commit.
	Fence Stage
	// Change is what the write does to its profile, for the change feed:
	// the backend records an event of it in the same commit. The empty
	// Change (Move) records none: a resize's copy, and the mirror of a
	// write into the next generation, change nothing a reader sees.
	Change partmap.OpKind
	// Copy says the record is written as it was read, a resize's copy: it
	// keeps its Committed. The backend sets every other record's Committed
	// to the commit's time, the time of its event (a mirror's too).
	Copy bool
}

// Move is the Change of a write that only moves a profile between
// generations.
const Move partmap.OpKind = ""

// Event is one change in the feed, as Feeder.Feed returns it.
type Event struct {
	Cursor string // Feed(after: Cursor) goes on after this event
	Time   int64  // commit time, Unix ms
	Op     partmap.OpKind
	Email  string
	Record *partmap.Record // nil for a deletion
}

// FeedPage is what Feeder.Feed read.
type FeedPage struct {
	Events []Event
	Next   string
	// End says the read reached the feed's end: every event whose commit
	// was acknowledged before the call is in Events or behind its after.
	// A page cut short by its limit is not the end, nor one that a
	// backend could not yet see to its end (Redis: a change in a
	// millisecond its masters' clocks had not all passed).
	End bool
}

// FeedSignaler is a Backend whose feed is costly to read (Redis: a script
// per partition) but that has a cheap sign of appends: a long poll that
// read to the end reads again only once the sign has changed.
type FeedSignaler interface {
	// FeedSignal returns a value that changes when an event is appended:
	// if one is appended after a call returned s, later calls return
	// something else, but for a coincidence the backend documents, which
	// only holds a change back until the long poll's wait ends. It may
	// change without an append; that only costs a read.
	FeedSignal(ctx context.Context) (string, error)
}

// Stage is where a generation is in a resize, as Shared.Mark records it.
// Stages only move forward: serving, resizing (being copied into the next
// generation), retired (replaced by it).
type Stage string

const (
	StageServing  Stage = ""
	StageResizing Stage = "resizing"
	StageRetired  Stage = "retired"
)

// ErrStale refuses a write or read of a generation that another server's
// resize has moved on (Shared.Mark), or, said by the directory, an
// invocation planned on a layout it has since replaced. The operation runs
// again on the current layout.
var ErrStale = errors.New("engine: the layout changed; run again")

// ErrChanged refuses a commit without a lease (Backend.Commit) because a
// record it writes is no longer the one its writer read: another server
// wrote it meanwhile. The engine runs the invocation again.
var ErrChanged = errors.New("engine: a record changed since it was read; run again")

// Position is a place in enumeration order: partition, then email.
type Position struct {
	Partition partmap.Partition
	Email     string
}

// Item is one profile found by a scan.
type Item struct {
	Position
	Record partmap.Record
}

// Query selects profiles of one generation for Backend.Scan.
type Query struct {
	Generation int
	After      *Position         // strictly after this position; nil from the start
	End        partmap.Partition // stop before this partition
	Limit      int
	// Where, when not empty, keeps only the profiles whose index entries
	// hold every condition, found through the entries of the first. The
	// caller re-checks the records: one may change between its entries
	// and its record being read.
	Where []IndexMatch
}

// IndexEntry is one secondary-index entry: Email's profile holds Value in
// the field at position Field of the directory's index list.
type IndexEntry struct {
	Field int
	Value string
	Email string
}

// ExpiryField is the field position of expiry entries, which the engine
// keeps beside those of the indexed fields, in the same partitions and the
// same commits: a record with a deadline has one for when it ends
// (partmap.Record.End; ExpiryValue with profile true) and one for its
// soonest field's. Their values sort as
// their deadlines do, so that a backend finds what is due by a range read
// of one field's entries (Backend.Due), and never reads a record to do so.
const ExpiryField = partmap.MaxIndexes

// IndexFields is how many fields index entries can have: every possible
// indexed field, and ExpiryField.
const IndexFields = ExpiryField + 1

// ExpiryValue is an expiry entry's value: the deadline as 16 decimal
// digits (so that byte order is time order), then 'p' for when the
// profile ends or 'f' for its soonest field's deadline. A deadline past
// maxExpiryValue, which only a profile's own can be, is entered as that
// one: the entries keep their one length, and no sweeper meets either.
func ExpiryValue(deadline int64, profile bool) string {
	deadline = min(deadline, maxExpiryValue)
	b := make([]byte, 17)
	for i := 15; i >= 0; i-- {
		b[i] = byte('0' + deadline%10)
		deadline /= 10
	}
	b[16] = 'f'
	if profile {
		b[16] = 'p'
	}
	return string(b)
}

// maxExpiryValue is the latest deadline 16 digits spell, 10^16-1 ms after
// the epoch, in the year 318857.
const maxExpiryValue = 1e16 - 1

// ExpiryBound is the least expiry value of deadline: every entry due
// before it sorts below it. Past maxExpiryValue every entry does, those
// entered at it too ('q' sorts after 'p' and 'f').
func ExpiryBound(deadline int64) string {
	if deadline > maxExpiryValue {
		return ExpiryValue(maxExpiryValue, false)[:16] + "q"
	}
	return ExpiryValue(deadline, false)[:16]
}

// ParseExpiryValue reads what ExpiryValue wrote.
func ParseExpiryValue(v string) (deadline int64, profile bool, ok bool) {
	if len(v) != 17 || (v[16] != 'p' && v[16] != 'f') {
		return 0, false, false
	}
	for _, c := range []byte(v[:16]) {
		if c < '0' || c > '9' {
			return 0, false, false
		}
		deadline = deadline*10 + int64(c-'0')
	}
	return deadline, v[16] == 'p', true
}

// expiryEntries are the expiry entries of rec, the profile of email.
func expiryEntries(email string, rec *partmap.Record) []IndexEntry {
	if rec == nil || rec.Deadlines.IsZero() {
		return nil
	}
	var out []IndexEntry
	if at := rec.End(); at != 0 {
		out = append(out, IndexEntry{Field: ExpiryField, Value: ExpiryValue(at, true), Email: email})
	}
	if at := rec.Deadlines.Earliest(); at != 0 {
		out = append(out, IndexEntry{Field: ExpiryField, Value: ExpiryValue(at, false), Email: email})
	}
	return out
}

// Entries are every index entry of rec, the profile of email: those of
// the indexed fields it holds, and its expiry entries.
func Entries(indexes []string, email string, rec *partmap.Record) []IndexEntry {
	var out []IndexEntry
	for i, f := range indexes {
		if v, ok := rec.Profile[f]; ok {
			out = append(out, IndexEntry{Field: i, Value: v, Email: email})
		}
	}
	return append(out, expiryEntries(email, rec)...)
}

// Due is one expiry entry that Backend.Due found.
type Due struct {
	Partition partmap.Partition
	Email     string
	Deadline  int64
	Profile   bool // when the profile ends (partmap.Record.End), not a field's deadline
}

// IndexMatch is one search condition, with its field as a position in the
// index list.
type IndexMatch struct {
	Field int
	Value string
}

// SearchFieldBase is the first field number of search-index entries
// (the directory's search indexes number their fields from here up to
// MaxSearchField). Their values never hold a 0 byte, and a backend keeps
// them in the order of their tail, the value, a 0 byte and the email, so
// that a range of tails is a range read (Searcher).
const SearchFieldBase = 32

// MaxSearchField is the last field number an index entry can have: a
// backend may give the field one byte.
const MaxSearchField = 254

// EntryTail is a search entry's tail, by which a backend orders the
// entries of one field and partition.
func EntryTail(value, email string) string { return value + "\x00" + email }

// IndexRange asks for the entries of one search field in one partition
// whose tails lie in [From, To), in tail order (descending with Reverse),
// at most Limit of them (0: all).
type IndexRange struct {
	Part     Part
	Field    int // SearchFieldBase or more
	From, To string
	Limit    int
	Reverse  bool
	// EmailsOnly leaves the entries' values out (""): a caller that only
	// needs who matches spares the backend a copy of each.
	EmailsOnly bool
}

// Searcher is a Backend that reads ranges of search entries; a directory
// over a backend without one has no search indexes.
type Searcher interface {
	// IndexRanges answers each range, in order, each from one view of its
	// partition that sees every commit that returned before the call.
	IndexRanges(ctx context.Context, ranges []IndexRange) ([][]IndexEntry, error)
}

// Indexer computes the search-index entries of records, which the engine
// keeps beside the legacy ones (Options.Indexes) in every commit.
type Indexer interface {
	// Changes returns the entries a write of email takes out and puts in
	// when it replaces prev by next (either nil for none).
	Changes(email string, prev, next *partmap.Record) (remove, add []IndexEntry)
}
