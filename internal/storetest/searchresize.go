package storetest

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/model"
)

// drawnQuery is a query and its options, drawn outside rapid.Check (by
// Generator.Example) where the store's state cannot be replayed: during a
// resize.
type drawnQuery struct {
	tree *qnode
	text string
	opts partmap.SearchOptions
}

func queryGenerator(def partmap.IndexDefinition) *rapid.Generator[drawnQuery] {
	return rapid.Custom(func(rt *rapid.T) drawnQuery {
		q := genQuery(rt, def)
		return drawnQuery{q, q.render(rt), genSearchOptions(rt, def)}
	})
}

// runSearchAcrossResize checks that a resize keeps search exact: refused
// while an index builds, creating and dropping indexes refused while it
// runs, and queries exact before, during (in either layout's order) and
// after it, with writes meanwhile read back at once.
func runSearchAcrossResize(t *testing.T, started func(*testing.T) partmap.Store) {
	ctx := context.Background()
	s := started(t)
	def := partmap.IndexDefinition{Name: "across", Fields: []partmap.IndexField{
		{Name: "a", Type: partmap.IndexText, Sortable: true},
		{Name: "b", Type: partmap.IndexTag, Sortable: true},
		{Name: "c", Type: partmap.IndexNumeric, Sortable: true},
	}}
	state := model.ExpiryState{}
	profiles := make([]partmap.Profile, 500)
	for i := range profiles {
		p := partmap.Profile{partmap.FieldEmail: fmt.Sprintf("across%03d@example.com", i),
			"a": textWords[i%len(textWords)] + " " + textWords[(i/3)%len(textWords)],
			"b": tagWords[i%len(tagWords)], "c": numWords[i%len(numWords)]}
		profiles[i] = p
		state[p.Email()] = model.Entry{Profile: p}
	}
	MustUpsert(t, s, profiles)
	if err := s.CreateIndex(ctx, def); err != nil {
		t.Fatal(err)
	}
	// The build walks the partitions of one layout: a resize waits.
	var err error
	for {
		_, err = s.Resize(ctx, 64)
		if partmap.ErrorCode(err) != partmap.ELOCKCONFLICT { // the build holds a partition now and then
			break
		}
	}
	if partmap.ErrorCode(err) != partmap.ECONFLICT || !strings.Contains(err.Error(), "building") {
		t.Fatalf("a resize while the index builds: %v, want a conflict that says so", err)
	}
	waitIndexBuilt(t, s, def.Name)

	stats, err := s.ListPartitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	queries := &atomic.Int64{}
	c := &searchChecker{s: s, name: def.Name, oracle: newQueryOracle(t, def), partitions: stats.MapPartitions(), built: true, queries: queries}
	gen := queryGenerator(def)
	example := 0
	check := func(what string) {
		t.Helper()
		example++
		q := gen.Example(example)
		c.check(t, q.tree, q.text, q.opts, liveProfiles(state, 0), what)
	}
	for range 5 {
		check("before the resize")
	}

	// Down to fewer partitions, which is quicker than up, held midway.
	var st partmap.ResizeStatus
	var lock partmap.WholeMapLock
	for n := 64; ; n += 64 {
		if n > 512 {
			t.Fatal("every resize ended before the whole-map lock was taken")
		}
		if _, err := s.Resize(ctx, n); err != nil {
			t.Fatal(err)
		}
		if lock, err = s.LockWholeMap(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
		if st, err = s.ResizeStatus(ctx); err == nil && st.Running {
			break
		}
		if err := s.UnlockWholeMap(ctx, lock.Lease); err != nil {
			t.Fatal(err)
		}
		c.partitions = WaitResized(t, s).Partitions // it ended first
	}
	c.alt = st.To
	for _, err := range []error{s.CreateIndex(ctx, partmap.IndexDefinition{Name: "late", Fields: def.Fields[:1]}), s.DropIndex(ctx, def.Name)} {
		if partmap.ErrorCode(err) != partmap.ECONFLICT {
			t.Fatalf("an index created or dropped during a resize: %v, want a conflict", err)
		}
	}
	for range 5 {
		check("during the resize, under the whole-map lock")
	}
	if err := s.UnlockWholeMap(ctx, lock.Lease); err != nil {
		t.Fatal(err)
	}
	// Writes while the mover runs, each read back by the next query.
	midway := 0
	for i := 0; i < 40; i++ {
		e := profiles[(i*37)%len(profiles)].Email()
		v := tagWords[i%len(tagWords)]
		op := partmap.Operation{Op: partmap.OpPatch, Email: e, Patch: partmap.Patch{"b": &v, "c": ptr(fmt.Sprint(i))}}
		switch i % 4 {
		case 1:
			op = partmap.Operation{Op: partmap.OpDelete, Email: e}
		case 2:
			op = partmap.Operation{Op: partmap.OpRename, Email: e, To: fmt.Sprintf("moved%03d@example.com", i), Replace: true}
		}
		err := retry(func() error { _, err := s.Apply(ctx, op); return err })
		next, want := state.ApplyOp(op, 0)
		if partmap.ErrorCode(err) != want.Code {
			t.Fatalf("%s %s during the resize: %v, model %v", op.Op, e, err, want)
		}
		state = next
		if st, err := s.ResizeStatus(ctx); err == nil && st.Running {
			midway++
		}
		check(fmt.Sprintf("after %s %s during the resize", op.Op, e))
	}
	final := WaitResized(t, s)
	c.partitions, c.alt = final.Partitions, 0
	for range 10 {
		check("after the resize")
	}
	CheckAll(t, s)
	t.Logf("%d searches compared with the model across a resize to %d partitions, %d of them after writes while it ran", queries.Load(), final.Partitions, midway)
}
