package engine

import (
	"context"
	"fmt"

	"github.com/partmap/partmap"
)

// Read returns the record of email in part as stored, nil when there is
// none. A lookup of one record takes no lock and stages nothing, so it
// needs no invocation: this saves a lookup the Tx and its bookkeeping.
func (e *Engine) Read(ctx context.Context, part Part, email string) (*partmap.Record, error) {
	return getOne(ctx, e.backend, part, []string{email})
}

// getOne reads the record of one (a single email) in part, nil when absent.
func getOne(ctx context.Context, b Backend, part Part, one []string) (*partmap.Record, error) {
	recs, err := b.Get(ctx, part, one)
	if err != nil {
		return nil, err
	}
	if len(recs) != 1 {
		return nil, fmt.Errorf("engine: Get returned %d records for 1 email", len(recs))
	}
	return recs[0], nil
}

// ReadRecords returns the records of emails in part as stored, in order,
// nil for a missing one, with one backend read for them all: a batch
// lookup reads each partition once. Like Read, it takes no lock and needs
// no invocation. The backend answers from one view of the partition
// (Backend.Get), so the records are as they were at one instant.
func (e *Engine) ReadRecords(ctx context.Context, part Part, emails []string) ([]*partmap.Record, error) {
	recs, err := e.backend.Get(ctx, part, emails)
	if err != nil {
		return nil, err
	}
	if len(recs) != len(emails) {
		return nil, fmt.Errorf("engine: Get returned %d records for %d emails", len(recs), len(emails))
	}
	return recs, nil
}
