package storetest

import (
	"context"
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
)

// A linearizability check records what concurrent clients asked and were
// answered, then asks porcupine whether some sequential order of the calls,
// consistent with their real-time order, explains every answer. A lost
// update, a stale read or a half-applied write makes that impossible.

type linKind int

const (
	linGet linKind = iota
	linPut
	linPatch
	linIncr
	linDelete
)

type linInput struct {
	kind  linKind
	email string
	put   partmap.Profile // linPut
	patch partmap.Patch   // linPatch
	field string          // linIncr
	by    int64           // linIncr
}

type linOutput struct {
	code    partmap.Code    // "" for success
	profile partmap.Profile // linGet
	created bool            // linPut
	added   int             // linPatch
	deleted int             // linPatch
	value   int64           // linIncr
}

// linState is one profile, or nil when it does not exist. Partitioning the
// history by email keeps each search small.
type linState = partmap.Profile

func linStep(state, in, out any) (bool, any) {
	cur, i, o := state.(linState), in.(linInput), out.(linOutput)
	if o.code == partmap.ELOCKCONFLICT {
		return true, cur // a conflict wrote nothing
	}
	switch i.kind {
	case linGet:
		if cur == nil {
			return o.code == partmap.ENOTFOUND, cur
		}
		return o.code == "" && sameProfile(o.profile, cur), cur
	case linPut:
		return o.code == "" && o.created == (cur == nil), i.put
	case linDelete:
		if cur == nil {
			return o.code == partmap.ENOTFOUND, cur
		}
		return o.code == "", linState(nil)
	case linPatch:
		if cur == nil {
			return o.code == partmap.ENOTFOUND, cur
		}
		next, added, deleted := cur.Clone(), 0, 0
		for f, v := range i.patch {
			_, had := next[f]
			switch {
			case v == nil && had:
				delete(next, f)
				deleted++
			case v != nil:
				if !had {
					added++
				}
				next[f] = *v
			}
		}
		return o.code == "" && o.added == added && o.deleted == deleted, next
	case linIncr:
		if cur == nil {
			return o.code == partmap.ENOTFOUND, cur
		}
		stored, present := cur[i.field]
		n, err := partmap.AddInteger(i.field, stored, present, i.by)
		if err != nil {
			return o.code == partmap.ErrorCode(err), cur
		}
		next := cur.Clone()
		next[i.field] = fmt.Sprint(n)
		return o.code == "" && o.value == n, next
	}
	return false, cur
}

func describeProfile(p partmap.Profile) string {
	if p == nil {
		return "absent"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(p)) {
		if k != partmap.FieldEmail {
			parts = append(parts, k+"="+p[k])
		}
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// LinearizabilityModel is the porcupine model of one profile per email.
var LinearizabilityModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byEmail := map[string][]porcupine.Operation{}
		for _, op := range history {
			e := op.Input.(linInput).email
			byEmail[e] = append(byEmail[e], op)
		}
		return slices.Collect(maps.Values(byEmail))
	},
	Init: func() any { return linState(nil) },
	Step: linStep,
	Equal: func(a, b any) bool {
		x, y := a.(linState), b.(linState)
		return (x == nil) == (y == nil) && sameProfile(x, y)
	},
	DescribeOperation: func(in, out any) string {
		i, o := in.(linInput), out.(linOutput)
		var call string
		switch i.kind {
		case linGet:
			call = "get"
		case linPut:
			call = "put " + describeProfile(i.put)
		case linDelete:
			call = "delete"
		case linPatch:
			var parts []string
			for f, v := range i.patch {
				if v == nil {
					parts = append(parts, f+"=null")
				} else {
					parts = append(parts, f+"="+*v)
				}
			}
			call = "patch {" + strings.Join(parts, " ") + "}"
		case linIncr:
			call = fmt.Sprintf("incr %s %+d", i.field, i.by)
		}
		result := string(o.code)
		switch {
		case o.code != "":
		case i.kind == linGet:
			result = describeProfile(o.profile)
		case i.kind == linPut:
			result = fmt.Sprintf("created=%v", o.created)
		case i.kind == linPatch:
			result = fmt.Sprintf("+%d -%d", o.added, o.deleted)
		case i.kind == linIncr:
			result = fmt.Sprint(o.value)
		default:
			result = "ok"
		}
		return fmt.Sprintf("%s %s → %s", strings.Split(i.email, "@")[0], call, result)
	},
	DescribeState: func(s any) string { return describeProfile(s.(linState)) },
}

// LinearizabilityOptions shape a recorded history.
type LinearizabilityOptions struct {
	Clients      int // concurrent clients, each with its own Store
	OpsPerClient int
	Emails       int // distinct emails, all in one partition
}

// RecordHistory runs concurrent clients doing get, put, patch, increment and
// delete on a few emails of one partition, and returns what each call was
// asked and answered, with real-time call and return stamps. newClient
// returns the Store of client i. An error partmap did not classify fails
// the test: its outcome would be unknown.
func RecordHistory(t *testing.T, newClient func(i int) partmap.Store, opts LinearizabilityOptions) []porcupine.Operation {
	emails, _ := Colliding(opts.Emails, partmap.DefaultPartitions, "lin")
	ctx := context.Background()
	start := time.Now()
	var mu sync.Mutex
	var history []porcupine.Operation
	var wg sync.WaitGroup
	for c := range opts.Clients {
		wg.Go(func() {
			s := newClient(c)
			rng := rand.New(rand.NewPCG(uint64(c), 42))
			for range opts.OpsPerClient {
				in := randomInput(rng, emails)
				call := time.Since(start).Nanoseconds()
				out, err := apply(ctx, s, in)
				ret := time.Since(start).Nanoseconds()
				if code := partmap.ErrorCode(err); code == partmap.EINTERNAL || code == partmap.EUNAVAILABLE {
					t.Errorf("client %d: %v: outcome unknown", c, err)
					return
				}
				mu.Lock()
				history = append(history, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return history
}

func randomInput(rng *rand.Rand, emails []string) linInput {
	in := linInput{email: emails[rng.IntN(len(emails))]}
	v := func() string { return fmt.Sprint(rng.IntN(4)) }
	switch n := rng.IntN(10); {
	case n < 3:
		in.kind = linGet
	case n < 5:
		in.kind = linIncr
		in.field, in.by = []string{"n", "m"}[rng.IntN(2)], int64(rng.IntN(5)-1)
	case n < 7:
		in.kind = linPatch
		in.patch = partmap.Patch{"a": ptr(v())}
		if rng.IntN(2) == 0 {
			in.patch["n"] = nil
		}
	case n < 9:
		in.kind = linPut
		in.put = partmap.Profile{partmap.FieldEmail: in.email, "a": v(), "n": v()}
	default:
		in.kind = linDelete
	}
	return in
}

func apply(ctx context.Context, s partmap.Store, in linInput) (linOutput, error) {
	var out linOutput
	var err error
	switch in.kind {
	case linGet:
		var rec partmap.Record
		rec, err = s.FindProfile(ctx, in.email)
		out.profile = rec.Profile
	case linPut:
		_, out.created, err = s.UpsertProfile(ctx, in.put, partmap.Condition{})
	case linPatch:
		var res partmap.PatchResult
		res, err = s.PatchProfile(ctx, in.email, in.patch, partmap.Condition{})
		out.added, out.deleted = res.FieldsAdded, res.FieldsDeleted
	case linIncr:
		var inc partmap.Increment
		inc, err = s.IncrementField(ctx, in.email, in.field, in.by, partmap.Condition{})
		out.value = inc.Value
	case linDelete:
		err = s.DeleteProfile(ctx, in.email, partmap.Condition{})
	}
	out.code = partmap.ErrorCode(err)
	return out, err
}

// CheckHistory runs porcupine on a history. When it is not linearizable,
// the HTML visualisation is written under $PARTMAP_ARTIFACTS (or the
// system's temporary directory) and its path is logged.
func CheckHistory(t *testing.T, history []porcupine.Operation) porcupine.CheckResult {
	t.Helper()
	res, info := porcupine.CheckOperationsVerbose(LinearizabilityModel, history, time.Minute)
	if res == porcupine.Illegal {
		dir := os.Getenv("PARTMAP_ARTIFACTS")
		if dir == "" {
			dir = os.TempDir()
		}
		os.MkdirAll(dir, 0o755)
		path := filepath.Join(dir, fmt.Sprintf("%s-%d.html", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().UnixNano()))
		if err := porcupine.VisualizePath(LinearizabilityModel, info, path); err != nil {
			t.Logf("writing the visualisation: %v", err)
		} else {
			t.Logf("history is not linearizable; visualisation: %s", path)
		}
	}
	return res
}
