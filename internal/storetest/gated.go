package storetest

import (
	"context"
	"slices"
	"sync"

	"github.com/partmap/partmap"
)

// Gated is a store whose first write (an Apply but a get's, or a
// Transact) waits until Gate is closed, with Entered closed once it
// waits, and that records how many operations each write call carries:
// the writes that arrive meanwhile show how a caller groups them.
type Gated struct {
	partmap.Store
	Entered, Gate chan struct{}
	// GroupErr, when set, is what a Transact of several operations fails
	// with, without running.
	GroupErr error

	once  sync.Once
	mu    sync.Mutex
	calls []int
}

// NewGated returns s gated.
func NewGated(s partmap.Store) *Gated {
	return &Gated{Store: s, Entered: make(chan struct{}), Gate: make(chan struct{})}
}

// Calls is the operations of each write call so far, in order.
func (g *Gated) Calls() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.calls)
}

func (g *Gated) wrote(n int) {
	g.mu.Lock()
	g.calls = append(g.calls, n)
	g.mu.Unlock()
	g.once.Do(func() {
		close(g.Entered)
		<-g.Gate
	})
}

func (g *Gated) Apply(ctx context.Context, op partmap.Operation) (partmap.OperationResult, error) {
	if op.Op != partmap.OpGet {
		g.wrote(1)
	}
	return g.Store.Apply(ctx, op)
}

func (g *Gated) Transact(ctx context.Context, ops []partmap.Operation) ([]partmap.OperationResult, error) {
	g.wrote(len(ops))
	if g.GroupErr != nil && len(ops) > 1 {
		return nil, g.GroupErr
	}
	return g.Store.Transact(ctx, ops)
}
