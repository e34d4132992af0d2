package partmap

import "context"

// Store is the contract every backend and the HTTP client implement. Errors
// are *Error values; use errors.Is with the sentinels or ErrorCode.
//
// Every profile method fails with ENOTSTARTED until Start has been called
// once, by anyone, on the directory. Emails are canonicalised by the store;
// a bad one fails with EINVALIDEMAIL (or ETOOLARGE) and writes nothing.
type Store interface {
	// Start starts the directory. It is idempotent: startedNow is false when
	// the directory had already been started.
	Start(ctx context.Context) (startedNow bool, err error)

	// FindProfile returns the profile of email. A missing partition and a
	// missing email alike return ENOTFOUND. It takes no lock.
	FindProfile(ctx context.Context, email string) (Record, error)

	// UpsertProfile replaces the whole profile whose key is p's emailAddress,
	// or creates it, and reports which. The stored emailAddress is canonical.
	// Errors: validation codes (nothing written), EPRECONDITION when cond
	// fails, ELOCKCONFLICT when the partition stayed locked past the wait
	// budget (retry: the write is idempotent).
	UpsertProfile(ctx context.Context, p Profile, cond Condition) (rec Record, created bool, err error)
}
