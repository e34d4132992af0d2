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

func (r retrying) PatchProfile(ctx context.Context, email string, patch partmap.Patch, cond partmap.Condition) (partmap.PatchResult, error) {
	return retry(ctx, func() (partmap.PatchResult, error) { return r.Store.PatchProfile(ctx, email, patch, cond) })
}

func (r retrying) IncrementField(ctx context.Context, email, field string, by int64, cond partmap.Condition) (partmap.Increment, error) {
	return retry(ctx, func() (partmap.Increment, error) { return r.Store.IncrementField(ctx, email, field, by, cond) })
}

func (r retrying) DeleteProfile(ctx context.Context, email string, cond partmap.Condition) error {
	_, err := retry(ctx, func() (struct{}, error) { return struct{}{}, r.Store.DeleteProfile(ctx, email, cond) })
	return err
}

func (r retrying) Transact(ctx context.Context, ops []partmap.Operation) ([]partmap.OperationResult, error) {
	return retry(ctx, func() ([]partmap.OperationResult, error) { return r.Store.Transact(ctx, ops) })
}
