package postgres_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/pgtest"
	"github.com/partmap/partmap/postgres"
)

// The projection is a second oracle of search: TAG and NUMERIC queries
// with AND, OR and NOT, translated into SQL over the projected table,
// find what the search index finds, and sorted the same way. The index is
// created halfway through the writes, so that it is built under them.
func TestSearchIndexAgreesWithSQL(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	def := partmap.IndexDefinition{Name: "sql", Fields: []partmap.IndexField{
		{Name: partmap.FieldCompanyName, Type: partmap.IndexTag, CaseSensitive: true},
		{Name: partmap.FieldCustomerTier, Type: partmap.IndexTag},
		{Name: "visits", Type: partmap.IndexNumeric, Sortable: true},
		{Name: "tags", Type: partmap.IndexTag, Separator: ";"},
		{Name: "labels", Type: partmap.IndexTag, CaseSensitive: true},
		{Name: "score", Type: partmap.IndexNumeric, Sortable: true},
		{Name: "n", Type: partmap.IndexNumeric},
	}}
	rng := rand.New(rand.NewPCG(51, 52))
	r := e.project(t, postgres.Options{})
	write := func() {
		pgtest.Workload(t, e.store, rng, 200, 200)
		pgtest.SearchWorkload(t, e.store, rng, 200, 300, []string{"tags", "labels"}, []string{"score", "n"})
	}
	write()
	if err := e.store.CreateIndex(ctx, def); err != nil {
		t.Fatal(err)
	}
	write()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		_, err := e.store.Search(ctx, def.Name, partmap.SearchOptions{Query: "*", Limit: -1})
		if err == nil {
			break
		}
		if partmap.ErrorCode(err) != partmap.EUNAVAILABLE || time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	e.caughtUp(t, postgres.DefaultTable, r)
	r.stop(t)
	if found := pgtest.CompareSearchIndex(t, e.pool, e.store, postgres.DefaultTable, def, rng, 150); found == 0 {
		t.Fatal("no query found anything: nothing was compared")
	}
}
