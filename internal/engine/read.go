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
