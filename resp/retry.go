package resp

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/partmap/partmap"
)

// retryTime bounds how long a write retries lock conflicts. A Redis
// client does not expect them: a lock conflict wrote nothing, so the
// server retries the write itself, with backoff, and answers TRYAGAIN
// only once this has passed.
const retryTime = 2 * time.Second

// retrying is the store with its writes retried on lock conflicts.
type retrying struct{ partmap.Store }

func retry[T any](ctx context.Context, f func() (T, error)) (T, error) {
	deadline := time.Now().Add(retryTime)
	pause := time.Millisecond
	for {
		v, err := f()
		if partmap.ErrorCode(err) != partmap.ELOCKCONFLICT || time.Now().After(deadline) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(pause/2 + rand.N(pause)):
		}
		pause = min(2*pause, 20*time.Millisecond)
	}
}

func (r retrying) Apply(ctx context.Context, op partmap.Operation) (partmap.OperationResult, error) {
	return retry(ctx, func() (partmap.OperationResult, error) { return r.Store.Apply(ctx, op) })
}

func (r retrying) Transact(ctx context.Context, ops []partmap.Operation) ([]partmap.OperationResult, error) {
	return retry(ctx, func() ([]partmap.OperationResult, error) { return r.Store.Transact(ctx, ops) })
}
