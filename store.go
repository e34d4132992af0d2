package partmap

import (
	"context"
	"time"
)

// Store is the contract every backend and the HTTP client implement. Errors
// are *Error values; use errors.Is with the sentinels or ErrorCode.
//
// Every profile method fails with ENOTSTARTED until Start has been called
// once, by anyone, on the directory. Emails are canonicalised by the store;
// a bad one fails with EINVALIDEMAIL (or ETOOLARGE) and writes nothing.
// Every write locks its profile's partition (a rename's two, a transaction's
// all) and fails with ELOCKCONFLICT when one stayed locked past the wait
// budget; a conflict wrote nothing, so the call can be retried. A write whose
// Condition does not hold fails with EPRECONDITION and writes nothing.
type Store interface {
	// Start starts the directory. It is idempotent: startedNow is false when
	// the directory had already been started.
	Start(ctx context.Context) (startedNow bool, err error)

	// FindProfile returns the profile of email. A missing partition and a
	// missing email alike return ENOTFOUND. It takes no lock.
	FindProfile(ctx context.Context, email string) (Record, error)

	// ProjectProfile returns the named fields of email's profile, in the
	// order asked, like HMGET: a nil value is a missing field, a pointer to
	// "" a present empty one. A missing profile is ENOTFOUND, and creates
	// nothing. fields must be non-empty, without repeats (EINVALID).
	ProjectProfile(ctx context.Context, email string, fields []string) (Projection, error)

	// FindProfiles looks up many profiles at once: the profiles of emails,
	// in the order asked, with nil for one that does not exist (which is
	// not an error). An email given twice, in any spelling, is answered
	// twice. Each partition is read once, with one backend read for all its
	// emails, and no lock is taken. The answers of one partition are from
	// one instant. On the embedded store (pebble) so is the whole batch:
	// a rename or a transaction shows in all of it or in none. On Redis
	// each partition is read at its own instant, and the batch is not a
	// snapshot of the directory: a transaction that only reads is.
	//
	// emails must hold 1 to MaxBatchEmails addresses (EINVALID otherwise);
	// a bad one fails the whole call with EINVALIDEMAIL (or ETOOLARGE)
	// naming its index and value, and nothing is answered.
	FindProfiles(ctx context.Context, emails []string) ([]*Record, error)

	// ProjectProfiles is FindProfiles with each profile found projected as
	// ProjectProfile does: the named fields in the order asked, a nil value
	// for a missing field, and a nil *Projection for a missing profile.
	// fields must be non-empty, without repeats or empty names (EINVALID),
	// and valid UTF-8 (EINVALIDUTF8); an error names the bad one by index.
	ProjectProfiles(ctx context.Context, emails []string, fields []string) ([]*Projection, error)

	// Deadlines reads when email's profile and the named fields expire, as
	// TTL, HTTL and their siblings do (expiry.go). A missing profile is
	// ENOTFOUND; fields may be empty, and a field named twice is answered
	// twice (the HTTP client refuses it, EINVALID: FieldsOnce).
	// Setting and removing deadlines, and the rest of Redis's hash
	// commands, are operations (Apply, Transact).
	Deadlines(ctx context.Context, email string, fields []string) (TTLs, error)

	// Apply runs one operation of any kind on its profile, with the
	// semantics Transact gives it, locking only that profile's partition
	// (a rename's two). Its errors name no operation. UpsertProfile,
	// PatchProfile, IncrementField, DeleteProfile and RenameProfile call it
	// for the commonest kinds.
	Apply(ctx context.Context, op Operation) (OperationResult, error)

	// Transact applies up to MaxTransactionSteps operations (the HTTP
	// client: MaxTransactionOps, its route's bound) to at most
	// MaxTransactionOps profiles, in any partitions, all or none (but an
	// operation that fails alone, FailAlone): it locks every partition they name,
	// applies them in order (an operation sees what the earlier ones did to
	// its profile), and commits them in one atomic step. Each result is the
	// one the single-profile call would give. The first operation that
	// fails (a condition, a missing profile, a bad increment) fails the
	// whole transaction, writes nothing, and its *Error names it
	// (Error.Operation). Bad input is EINVALID, or the code the
	// single-profile call would give, before anything is locked.
	Transact(ctx context.Context, ops []Operation) ([]OperationResult, error)

	// ListProfiles returns a page of profiles in partition order, then
	// canonical email order. A profile that exists for the whole of a scan
	// is returned exactly once, whatever is written meanwhile. Start with an
	// empty cursor; a cursor this directory did not issue, or issued for
	// another search, is EINVALID.
	//
	// With Where, it searches: only profiles whose fields hold exactly every
	// given value (AND), found through the secondary indexes. Every field
	// named must be indexed (EINVALID otherwise), each at most once.
	ListProfiles(ctx context.Context, opts ListOptions) (Page, error)

	// CreateIndex declares a search index and returns at once: the
	// profiles that exist are indexed in the background (IndexInfo's
	// Building and Progress), and every write from then on keeps the
	// index in its own commit. A name in use is EEXISTS; a bad
	// definition, or one index too many, EINVALID.
	CreateIndex(ctx context.Context, def IndexDefinition) error

	// DropIndex removes a search index and, in the background, its
	// entries. An unknown name is ENOTFOUND; the legacy index cannot be
	// dropped (EINVALID).
	DropIndex(ctx context.Context, name string) error

	// ListIndexes describes every search index, by name, the legacy one
	// (LegacyIndexName) first when the directory has indexed fields.
	ListIndexes(ctx context.Context) ([]IndexInfo, error)

	// Search runs a query in the Redis Query Engine's syntax on a search
	// index. An unknown index is ENOTFOUND; a bad query EINVALID, with
	// where it went wrong; an index still building EUNAVAILABLE. A write
	// acknowledged before the call is seen by it.
	Search(ctx context.Context, index string, opts SearchOptions) (SearchResult, error)

	// ListPartitions describes the partitions that exist, in order.
	ListPartitions(ctx context.Context) (PartitionStats, error)

	// CheckPartition verifies that partition p's stored count and secondary
	// index entries agree with its profiles, holding p's lock meanwhile so
	// that the answer is exact, and reports any drift. It repairs nothing.
	// A partition outside the map is EINVALID.
	CheckPartition(ctx context.Context, p Partition) (PartitionCheck, error)

	// CheckPartitions checks partitions first up to end (not included) as
	// CheckPartition does, one at a time and in order, and calls fn with
	// each; end 0 means the map's last partition. It holds each partition's
	// lock only while it checks that one. A range outside the map is
	// EINVALID; an error from fn stops the check and is returned.
	CheckPartitions(ctx context.Context, first, end Partition, fn func(PartitionCheck) error) error

	// UpsertProfiles upserts many profiles, for imports and preloading. It
	// groups them by partition and commits a few partitions' groups at a
	// time (one on a store that commits per partition), each commit atomic
	// under its partitions' locks, held until the batch is applied and not
	// across its fsync. Each profile gets its own result, in order: a bad profile fails
	// alone, with its validation error, and a group that met a lock conflict
	// fails with ELOCKCONFLICT for each of its profiles (retry those). The
	// same email twice applies in order. The error is for the call as a
	// whole (ENOTSTARTED, too many profiles).
	UpsertProfiles(ctx context.Context, profiles []Profile) ([]BulkResult, error)

	// UpsertRecords is UpsertProfiles for records with deadlines, as an
	// import restores an export's: each profile is written with its
	// record's Deadlines, in the same commit (Version and Committed are
	// ignored: the write makes its own). A
	// deadline that has passed is written as it is and has expired at
	// once, as if it had passed just after the write: the field, or the
	// whole profile, is never seen, and the sweeper reclaims it. Deadlines
	// that Deadlines.Check refuses fail their profile alone.
	UpsertRecords(ctx context.Context, records []Record) ([]BulkResult, error)

	// LockWholeMap takes every partition's lock and holds it for d (more
	// than 0, at most MaxWholeMapLock), for bulk maintenance: writers
	// meanwhile fail with ELOCKCONFLICT (after their usual wait), exactly
	// as behind any other writer, and retry; reads go on. One is held at a
	// time (ELOCKCONFLICT otherwise). The lease releases it early; it
	// releases itself when d has passed.
	LockWholeMap(ctx context.Context, d time.Duration) (WholeMapLock, error)

	// UnlockWholeMap releases the whole-map lock held under lease; an
	// unknown or expired lease is ENOTFOUND.
	UnlockWholeMap(ctx context.Context, lease string) error

	// Resize starts rehashing every profile into a new layout generation of
	// the given partition count (1 to MaxPartitions), and returns at once;
	// the move runs in the background while the directory keeps serving
	// reads and writes. Asking again for the same count reports on (and if
	// need be resumes) the resize in progress; another count while one
	// runs is ECONFLICT.
	Resize(ctx context.Context, partitions int) (ResizeStatus, error)

	// ResizeStatus describes the layout and the resize in progress.
	ResizeStatus(ctx context.Context) (ResizeStatus, error)

	// ExportProfiles calls fn with every profile, in ListProfiles order,
	// from one consistent snapshot of the whole directory: the export shows
	// the directory as it was at one instant, whatever is written meanwhile.
	// An error from fn stops the export and is returned. Records carry no
	// Version. How a backend freezes the directory is its own business:
	// Pebble reads a snapshot and blocks nobody; Redis, which has none,
	// holds the whole-map lock, so writers meet lock conflicts meanwhile.
	ExportProfiles(ctx context.Context, fn func(Record) error) error
}

// WholeMapLock is a held whole-map lock.
type WholeMapLock struct {
	Lease   string
	Expires time.Time
}

// MaxWholeMapLock bounds how long one LockWholeMap holds every writer off.
const MaxWholeMapLock = time.Hour

// BulkResult is the outcome of one profile of UpsertProfiles.
type BulkResult struct {
	Record  Record // the stored profile, when Err is nil
	Created bool
	Err     error
}

// MaxBulkProfiles bounds one UpsertProfiles call.
const MaxBulkProfiles = 10000

// Projection is the answer to ProjectProfile.
type Projection struct {
	Fields  []string
	Values  []*string // nil: the field is missing
	Version Version
}

// PatchResult is the answer to PatchProfile.
type PatchResult struct {
	Record        Record
	FieldsAdded   int
	FieldsDeleted int
}

// Increment is the answer to IncrementField.
type Increment struct {
	Email   string
	Field   string
	Value   int64
	Version Version
}

// ListOptions select a page of ListProfiles.
type ListOptions struct {
	Cursor string  // "" for the first page
	Limit  int     // 0 means DefaultPageLimit; at most MaxPageLimit
	Where  []Match // search conditions, AND-ed; none lists everything
}

// Page sizes of ListProfiles.
const (
	DefaultPageLimit = 100
	MaxPageLimit     = 1000
)

// Page is one page of ListProfiles. NextCursor is "" on the last page. The
// HTTP client's records carry no Version (it is 0): a list has no ETags.
type Page struct {
	Profiles   []Record
	NextCursor string
}

// PartitionCount is one existing partition and its number of profiles.
type PartitionCount struct {
	Partition Partition
	Profiles  int64
}

// PartitionStats is the answer to ListPartitions.
type PartitionStats struct {
	Partitions      []PartitionCount
	TotalProfiles   int64
	TotalPartitions int      // the map's partition count, in use or not
	Indexes         []string // the indexed fields
}

// MapPartitions is the map's partition count, which a resize changes:
// TotalPartitions, or DefaultPartitions when that is 0, as from a server
// older than the field.
func (s PartitionStats) MapPartitions() int {
	if s.TotalPartitions == 0 {
		return DefaultPartitions
	}
	return s.TotalPartitions
}
