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

// ReadView returns the records of reads, partitions of generation gen, as
// ReadRecords would, but from one view of them all (ViewReader). ok is
// false, and nothing is read, when the backend has no such view.
func (e *Engine) ReadView(ctx context.Context, gen int, reads []Read) (recs [][]*partmap.Record, ok bool, err error) {
	if e.view == nil {
		return nil, false, nil
	}
	if recs, err = e.view.GetView(ctx, gen, reads); err != nil {
		return nil, true, err
	}
	if len(recs) != len(reads) {
		return nil, true, fmt.Errorf("engine: GetView returned %d partitions for %d", len(recs), len(reads))
	}
	for i, r := range reads {
		if len(recs[i]) != len(r.Emails) {
			return nil, true, fmt.Errorf("engine: GetView returned %d records for %d emails of %s", len(recs[i]), len(r.Emails), r.Partition)
		}
	}
	return recs, true, nil
}
