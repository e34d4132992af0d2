package partmap

import (
	"context"
	"errors"
	"sync"
)

// deferral collects the waits for durability of the writes made under
// one DeferDurability context.
type deferral struct {
	mu    sync.Mutex
	waits []func() error
}

type deferralKey struct{}

// DeferDurability returns a context under which a store's write returns
// as soon as it is committed and visible, and wait, which blocks until
// every such write is durable. The caller must see wait return nil before
// it acknowledges any of them: a client's pipelined commands share fsyncs
// this way, their replies all sent after the last. A store that cannot
// defer makes each write durable before it returns, as without it.
func DeferDurability(ctx context.Context) (_ context.Context, wait func() error) {
	d := &deferral{}
	return context.WithValue(ctx, deferralKey{}, d), func() error {
		d.mu.Lock()
		waits := d.waits
		d.waits = nil
		d.mu.Unlock()
		var errs []error
		for _, w := range waits {
			errs = append(errs, w())
		}
		return errors.Join(errs...)
	}
}

// Defer hands durable, the wait for a write's durability, to ctx's
// DeferDurability, and reports whether there is one; without one the
// store must wait itself.
func Defer(ctx context.Context, durable func() error) bool {
	d, ok := ctx.Value(deferralKey{}).(*deferral)
	if !ok {
		return false
	}
	d.mu.Lock()
	d.waits = append(d.waits, durable)
	d.mu.Unlock()
	return true
}

// Deferring reports whether ctx is under DeferDurability.
func Deferring(ctx context.Context) bool {
	_, ok := ctx.Value(deferralKey{}).(*deferral)
	return ok
}

// Deferred is how many writes under ctx's DeferDurability wait for its
// wait: none means that every write made under it is durable already.
func Deferred(ctx context.Context) int {
	d, ok := ctx.Value(deferralKey{}).(*deferral)
	if !ok {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.waits)
}
