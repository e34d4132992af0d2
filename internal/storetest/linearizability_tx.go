package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/model"
)

// TxLinearizabilityModel is the porcupine model of histories with
// transactions and renames: its state is every profile of the history's
// few emails (model.State), stepped by model.Call.Apply. A transaction
// touches several emails, so the history is one porcupine partition; it is
// kept short.
var TxLinearizabilityModel = porcupine.Model{
	Init: func() any { return model.State{} },
	Step: func(state, in, out any) (bool, any) {
		cur, got := state.(model.State), out.(model.Answer)
		if got.Code == partmap.ELOCKCONFLICT {
			return true, cur // a conflict wrote nothing
		}
		next, want := in.(model.Call).Apply(cur)
		return want.Same(got), next
	},
	Equal:             func(a, b any) bool { return a.(model.State).Equal(b.(model.State)) },
	DescribeOperation: func(in, out any) string { return fmt.Sprintf("%v → %v", in, out) },
	DescribeState:     func(s any) string { return s.(model.State).String() },
}

// TxLinearizabilityOptions shape a history of transactions.
type TxLinearizabilityOptions struct {
	Clients        int // concurrent clients, each with its own Store
	CallsPerClient int
	// Emails are the profiles the calls touch; nil means four, each in a
	// partition of its own.
	Emails []string
	// Setup calls run one after another before the clients start, and
	// are part of the history.
	Setup []model.Call
	// Draw draws client c's next call; nil means model.RandomCall.
	Draw func(rng *rand.Rand, c int, emails []string) model.Call
}

// Spread returns n canonical emails, built from prefix, each in a
// partition of its own.
func Spread(n int, prefix string) []string {
	var out []string
	seen := map[string]bool{}
	for i := 0; len(out) < n; i++ {
		e := fmt.Sprintf("%s%d@example.com", prefix, i)
		if p := partitionOf(e); !seen[p] {
			seen[p] = true
			out = append(out, e)
		}
	}
	return out
}

// RecordTxHistory runs concurrent clients doing single-profile operations,
// renames and transactions over a few profiles in different partitions,
// and returns what each call was asked and answered, with real-time call
// and return stamps. newClient returns the Store of client i. An error
// partmap did not classify fails the test: its outcome would be unknown.
func RecordTxHistory(t *testing.T, newClient func(i int) partmap.Store, opts TxLinearizabilityOptions) []porcupine.Operation {
	t.Helper()
	emails := opts.Emails
	if emails == nil {
		emails = Spread(4, "txlin")
	}
	draw := opts.Draw
	if draw == nil {
		draw = func(rng *rand.Rand, _ int, emails []string) model.Call { return model.RandomCall(rng, emails) }
	}
	ctx := context.Background()
	r := &recorder{t: t, start: time.Now()}
	do := func(c int, s partmap.Store, call model.Call) bool {
		return r.record(c, call, func() (any, error) { return call.Do(ctx, s) })
	}
	if len(opts.Setup) > 0 {
		s := newClient(0)
		for _, call := range opts.Setup {
			if !do(0, s, call) {
				return nil
			}
		}
	}
	var wg sync.WaitGroup
	for c := range opts.Clients {
		wg.Go(func() {
			s := newClient(c)
			rng := rand.New(rand.NewPCG(uint64(c), 15))
			for range opts.CallsPerClient {
				if !do(c, s, draw(rng, c, emails)) {
					return
				}
			}
		})
	}
	wg.Wait()
	return r.history
}

// CheckTxHistory runs porcupine on a history of RecordTxHistory. When it is
// not linearizable, the HTML visualisation is written as CheckHistory
// says. A check that runs out of time is porcupine.Unknown.
func CheckTxHistory(t *testing.T, history []porcupine.Operation) porcupine.CheckResult {
	t.Helper()
	// One partition is searched as a whole: give a long run's time.
	limit := max(time.Minute, time.Duration(len(history))*10*time.Millisecond)
	return checkAndVisualize(t, TxLinearizabilityModel, history, limit)
}

// TxCalls is $PARTMAP_TX_CALLS, the calls per client of the transaction
// linearizability checks, or def for the normal run.
func TxCalls(t *testing.T, def int) int { return EnvCount(t, "PARTMAP_TX_CALLS", def) }

// CheckTxLinearizable records a history of newClient's stores and fails t
// unless it is linearizable.
func CheckTxLinearizable(t *testing.T, newClient func(i int) partmap.Store, opts TxLinearizabilityOptions) {
	t.Helper()
	history := RecordTxHistory(t, newClient, opts)
	if t.Failed() {
		return
	}
	began := time.Now()
	res := CheckTxHistory(t, history)
	t.Logf("checked in %v: %v", time.Since(began).Round(time.Millisecond), res)
	logAnswers(t, history)
	if res != porcupine.Ok {
		t.Fatalf("porcupine: %v", res)
	}
}

// logAnswers logs how many calls of a history answered what.
func logAnswers(t *testing.T, history []porcupine.Operation) {
	t.Helper()
	answers := map[string]int{}
	for _, op := range history {
		kind := "single"
		if op.Input.(model.Call).Tx {
			kind = "tx"
		}
		code := op.Output.(model.Answer).Code
		if code == "" {
			code = "ok"
		}
		answers[kind+" "+string(code)]++
	}
	t.Logf("%d calls; answers %v", len(history), answers)
}

// RecordRenameRace records clients that rename two profiles back and forth
// among four addresses in four partitions (alone, or both in one
// transaction), and meet not-found and exists, while as many readers look
// the addresses up. Each profile is under exactly one address at every
// instant: a reader that saw it under two, or under none, makes the
// history non-linearizable (CheckTxHistory).
func RecordRenameRace(t *testing.T, newClient func(i int) partmap.Store, callsPerClient int) []porcupine.Operation {
	t.Helper()
	emails := Spread(4, "race")
	setup := []model.Call{
		{Ops: []model.Op{{Kind: model.Put, Email: emails[0], Put: partmap.Profile{partmap.FieldEmail: emails[0], "who": "x"}}}},
		{Ops: []model.Op{{Kind: model.Put, Email: emails[1], Put: partmap.Profile{partmap.FieldEmail: emails[1], "who": "y"}}}},
	}
	rename := func(rng *rand.Rand) model.Op {
		i := rng.IntN(len(emails))
		j := (i + 1 + rng.IntN(len(emails)-1)) % len(emails)
		return model.Op{Kind: model.Rename, Email: emails[i], To: emails[j]}
	}
	draw := func(rng *rand.Rand, c int, emails []string) model.Call {
		switch {
		case c%2 == 1: // a reader
			return model.Call{Ops: []model.Op{{Kind: model.Get, Email: emails[rng.IntN(len(emails))]}}}
		case rng.IntN(4) == 0:
			return model.Call{Tx: true, Ops: []model.Op{rename(rng), rename(rng)}}
		}
		return model.Call{Ops: []model.Op{rename(rng)}}
	}
	return RecordTxHistory(t, newClient, TxLinearizabilityOptions{Clients: 8, CallsPerClient: callsPerClient, Emails: emails, Setup: setup, Draw: draw})
}
