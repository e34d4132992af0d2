package storetest

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/model"
)

// A linearizability check records what concurrent clients asked and were
// answered, then asks porcupine whether some sequential order of the calls,
// consistent with their real-time order, explains every answer. A lost
// update, a stale read or a half-applied write makes that impossible.

// LinearizabilityModel is the porcupine model: one profile per email, whose
// state is the profile (nil when absent), stepped by model.Op.Apply.
var LinearizabilityModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byEmail := map[string][]porcupine.Operation{}
		for _, op := range history {
			e := op.Input.(model.Op).Email
			byEmail[e] = append(byEmail[e], op)
		}
		return slices.Collect(maps.Values(byEmail))
	},
	Init: func() any { return partmap.Profile(nil) },
	Step: func(state, in, out any) (bool, any) {
		cur, got := state.(partmap.Profile), out.(model.Result)
		if got.Code == partmap.ELOCKCONFLICT {
			return true, cur // a conflict wrote nothing
		}
		next, want := in.(model.Op).Apply(cur)
		return want.Same(got), next
	},
	Equal:             func(a, b any) bool { return model.Equal(a.(partmap.Profile), b.(partmap.Profile)) },
	DescribeOperation: func(in, out any) string { return fmt.Sprintf("%v → %v", in, out) },
	DescribeState:     func(s any) string { return model.Describe(s.(partmap.Profile)) },
}

// LinearizabilityOptions shape a recorded history.
type LinearizabilityOptions struct {
	Clients      int // concurrent clients, each with its own Store
	OpsPerClient int
	Emails       int // distinct emails, all in one partition
	// Until, if set, keeps each client going past OpsPerClient until it
	// returns true (at most 50 times as many operations).
	Until func() bool
}

// RecordHistory runs concurrent clients doing get, put, patch, increment and
// delete on a few emails of one partition, and returns what each call was
// asked and answered, with real-time call and return stamps. newClient
// returns the Store of client i. An error partmap did not classify fails
// the test: its outcome would be unknown.
func RecordHistory(t *testing.T, newClient func(i int) partmap.Store, opts LinearizabilityOptions) []porcupine.Operation {
	emails, _ := Colliding(opts.Emails, partmap.DefaultPartitions, "lin")
	ctx := context.Background()
	r := &recorder{t: t, start: time.Now()}
	var wg sync.WaitGroup
	for c := range opts.Clients {
		wg.Go(func() {
			s := newClient(c)
			rng := rand.New(rand.NewPCG(uint64(c), 42))
			for i := 0; i < opts.OpsPerClient || (opts.Until != nil && !opts.Until() && i < 50*opts.OpsPerClient); i++ {
				op := model.Random(rng, emails)
				if !r.record(c, op, func() (any, error) { return op.Do(ctx, s) }) {
					return
				}
			}
		})
	}
	wg.Wait()
	return r.history
}

// A recorder collects a history from concurrent clients: what each call
// was asked and answered, with real-time call and return stamps.
type recorder struct {
	t       *testing.T
	start   time.Time
	mu      sync.Mutex
	history []porcupine.Operation
}

// record runs do, client c's call of in, and keeps it. An error partmap
// did not classify fails the test and is not kept, since its outcome
// would be unknown; record then reports false.
func (r *recorder) record(c int, in any, do func() (any, error)) bool {
	call := time.Since(r.start).Nanoseconds()
	out, err := do()
	ret := time.Since(r.start).Nanoseconds()
	if code := partmap.ErrorCode(err); code == partmap.EINTERNAL || code == partmap.EUNAVAILABLE {
		r.t.Errorf("client %d: %v: %v: outcome unknown", c, in, err)
		return false
	}
	r.mu.Lock()
	r.history = append(r.history, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret})
	r.mu.Unlock()
	return true
}

// CheckHistory runs porcupine on a history. When it is not linearizable,
// the HTML visualisation is written and its path logged: under go test
// -artifacts, as `make test` runs, to the test's artifact directory
// (t.ArtifactDir, under -outputdir), so that the checker tests, whose
// histories are illegal on purpose, leave nothing behind elsewhere; without
// it, to the system's temporary directory, since t.ArtifactDir's would be
// removed when the test ends.
func CheckHistory(t *testing.T, history []porcupine.Operation) porcupine.CheckResult {
	t.Helper()
	return checkAndVisualize(t, LinearizabilityModel, history, time.Minute)
}

// checkAndVisualize runs porcupine on a history of model; when it is not
// linearizable, it writes the visualisation as CheckHistory says.
func checkAndVisualize(t *testing.T, model porcupine.Model, history []porcupine.Operation, limit time.Duration) porcupine.CheckResult {
	t.Helper()
	res, info := porcupine.CheckOperationsVerbose(model, history, limit)
	if res == porcupine.Illegal {
		dir := os.TempDir()
		if f := flag.Lookup("test.artifacts"); f != nil && f.Value.String() == "true" {
			dir = t.ArtifactDir()
		}
		path := filepath.Join(dir, fmt.Sprintf("%s-%d.html", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().UnixNano()))
		if err := porcupine.VisualizePath(model, info, path); err != nil {
			t.Logf("writing the visualisation: %v", err)
		} else {
			t.Logf("history is not linearizable; visualisation: %s", path)
		}
	}
	return res
}
