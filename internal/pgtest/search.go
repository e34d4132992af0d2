package pgtest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partmap/partmap"
)

// The projection as a second oracle of search (issue 36): a query of TAG
// and NUMERIC fields, AND, OR and NOT is translated into SQL over the
// projected table, whose answer owes nothing to partmap's index entries
// or to internal/search, and must find what the index finds, in SORTBY's
// order when there is one.

// TagValues and NumberValues are what SearchWorkload writes to the
// fields it names: tags that differ in case and spaces (ASCII: the
// server's C locale folds ASCII only), numbers as strtod reads them and
// values that are none.
var (
	TagValues    = []string{"gold", "Gold", "silver", "vip", "new york", " b ", "x|y", "a;b", "gold;vip", "Silver ; b", ""}
	NumberValues = []string{"0", "7", "-1", "3.5", "12", "1e3", "007", "inf", "-inf", "abc", "", " 7", "+5", ".5", "1000", "7.0", "-0"}
)

// SearchWorkload runs n random writes of the fields tags (to TagValues)
// and numbers (to NumberValues) on Email(0) to Email(emails-1): upserts
// of them with the workload's own fields, patches, deletes and renames.
func SearchWorkload(t testing.TB, s partmap.Store, rng *rand.Rand, emails, n int, tags, numbers []string) {
	t.Helper()
	ctx := context.Background()
	value := func(f string) string {
		if slices.Contains(tags, f) {
			return TagValues[rng.IntN(len(TagValues))]
		}
		return NumberValues[rng.IntN(len(NumberValues))]
	}
	fields := append(slices.Clone(tags), numbers...)
	for range n {
		a := Email(rng.IntN(emails))
		var err error
		switch k := rng.IntN(10); {
		case k < 4:
			p := partmap.Profile{partmap.FieldEmail: a, partmap.FieldCustomerTier: Tiers[rng.IntN(len(Tiers))]}
			for _, f := range fields {
				if rng.IntN(4) > 0 {
					p[f] = value(f)
				}
			}
			_, _, err = partmap.UpsertProfile(ctx, s, p, partmap.Condition{})
		case k < 8:
			f := fields[rng.IntN(len(fields))]
			patch := partmap.Patch{f: nil}
			if rng.IntN(4) > 0 {
				v := value(f)
				patch[f] = &v
			}
			_, err = partmap.PatchProfile(ctx, s, a, patch, partmap.Condition{})
		case k < 9:
			err = partmap.DeleteProfile(ctx, s, a, partmap.Condition{})
		default:
			_, err = partmap.RenameProfile(ctx, s, a, Email(rng.IntN(emails)), partmap.Condition{})
		}
		switch partmap.ErrorCode(err) {
		case "", partmap.ENOTFOUND, partmap.EEXISTS, partmap.EINVALID, partmap.ELOCKCONFLICT:
		default:
			t.Errorf("search workload: %v", err)
			return
		}
	}
}

// sqlNumber is a NUMERIC field's value as search.ParseNumber reads it,
// in SQL: a decimal number or an infinity, else NULL. %s is the field's
// parameter.
const sqlNumber = `(CASE WHEN profile->>%[1]s ~ '^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$' THEN (profile->>%[1]s)::float8
	WHEN lower(profile->>%[1]s) IN ('inf', '+inf', 'infinity', '+infinity') THEN 'Infinity'::float8
	WHEN lower(profile->>%[1]s) IN ('-inf', '-infinity') THEN '-Infinity'::float8 END)`

// sqlQuery is a query as search text and as a SQL condition.
type sqlQuery struct {
	text, cond string
}

type sqlBuilder struct {
	rng  *rand.Rand
	def  partmap.IndexDefinition
	args []any
}

func (b *sqlBuilder) arg(v any) string {
	b.args = append(b.args, v)
	return "$" + strconv.Itoa(len(b.args))
}

// query draws a tree at most depth deep.
func (b *sqlBuilder) query(depth int) sqlQuery {
	k := b.rng.IntN(5)
	if depth == 0 {
		k = b.rng.IntN(2)
	}
	switch k {
	case 2:
		l, r := b.query(depth-1), b.query(depth-1)
		return sqlQuery{"(" + l.text + ") (" + r.text + ")", "(" + l.cond + " AND " + r.cond + ")"}
	case 3:
		l, r := b.query(depth-1), b.query(depth-1)
		return sqlQuery{"(" + l.text + ") | (" + r.text + ")", "(" + l.cond + " OR " + r.cond + ")"}
	case 4:
		q := b.query(depth - 1)
		return sqlQuery{"-(" + q.text + ")", "NOT " + q.cond}
	}
	var fields []partmap.IndexField
	for _, f := range b.def.Fields {
		if (k == 0) == (f.Type == partmap.IndexTag) {
			fields = append(fields, f)
		}
	}
	if len(fields) == 0 {
		return b.query(0)
	}
	f := fields[b.rng.IntN(len(fields))]
	if f.Type == partmap.IndexTag {
		return b.tag(f)
	}
	return b.numeric(f)
}

// tag is @f:{a|b}: the value split on the field's separator, each part
// trimmed (and folded unless CASESENSITIVE), holds one of the tags.
func (b *sqlBuilder) tag(f partmap.IndexField) sqlQuery {
	var text, want []string
	for range 1 + b.rng.IntN(2) {
		v := strings.TrimSpace(TagValues[b.rng.IntN(len(TagValues))])
		if v == "" {
			v = "gold"
		}
		var e strings.Builder
		for _, r := range v {
			if strings.ContainsRune(" ,./(){}[]:;~!@#$%^&*-=+|'`\"<>?\\", r) {
				e.WriteByte('\\')
			}
			e.WriteRune(r)
		}
		text = append(text, e.String())
		if !f.CaseSensitive {
			v = strings.ToLower(v)
		}
		want = append(want, v)
	}
	sep := f.Separator
	if sep == "" {
		sep = ","
	}
	part := `btrim(x, E' \t\n\r\f\x0b')` // Go's TrimSpace, in ASCII
	if !f.CaseSensitive {
		part = "lower(" + part + ")"
	}
	cond := fmt.Sprintf("EXISTS (SELECT 1 FROM unnest(string_to_array(profile->>%s, %s)) AS t(x) WHERE %s = ANY(%s))",
		b.arg(f.Name), b.arg(sep), part, b.arg(want))
	return sqlQuery{"@" + f.Name + ":{" + strings.Join(text, "|") + "}", cond}
}

var bounds = []float64{math.Inf(-1), -1, 0, 3.5, 7, 12, 1000, math.Inf(1)}

// numeric is @f:[lo hi], either bound perhaps exclusive.
func (b *sqlBuilder) numeric(f partmap.IndexField) sqlQuery {
	lo, hi := bounds[b.rng.IntN(len(bounds))], bounds[b.rng.IntN(len(bounds))]
	if lo > hi {
		lo, hi = hi, lo
	}
	loEx, hiEx := b.rng.IntN(3) == 0, b.rng.IntN(3) == 0
	format := func(x float64, ex bool) string {
		s := strconv.FormatFloat(x, 'g', -1, 64)
		switch {
		case math.IsInf(x, 1):
			s = "+inf"
		case math.IsInf(x, -1):
			s = "-inf"
		}
		if ex {
			s = "(" + s
		}
		return s
	}
	num := fmt.Sprintf(sqlNumber, b.arg(f.Name))
	op := func(ex bool, incl, excl string) string {
		if ex {
			return excl
		}
		return incl
	}
	cond := fmt.Sprintf("COALESCE(%s %s %s AND %s %s %s, false)", num, op(loEx, ">=", ">"), b.arg(lo), num, op(hiEx, "<=", "<"), b.arg(hi))
	return sqlQuery{fmt.Sprintf("@%s:[%s %s]", f.Name, format(lo, loEx), format(hi, hiEx)), cond}
}

// CompareSearchIndex asks n random queries of def's TAG and NUMERIC
// fields of the index and of the projected table, and fails the test
// where they differ: in total, in the emails found, or, sorted by a
// SORTABLE NUMERIC field, in their order (missing values last, ties by
// email). The store's index must be built. It returns how many matches
// the queries found, so that a caller can tell that they found some.
func CompareSearchIndex(t testing.TB, pool *pgxpool.Pool, s partmap.Store, table string, def partmap.IndexDefinition, rng *rand.Rand, n int) int {
	t.Helper()
	ctx := context.Background()
	var sortable []string
	for _, f := range def.Fields {
		if f.Type == partmap.IndexNumeric && f.Sortable {
			sortable = append(sortable, f.Name)
		}
	}
	found := 0
	for range n {
		b := &sqlBuilder{rng: rng, def: def}
		q := b.query(3)
		opts := partmap.SearchOptions{Query: q.text, Limit: partmap.MaxSearchLimit, NoContent: true}
		order := "email"
		if len(sortable) > 0 && rng.IntN(2) == 0 {
			opts.SortBy, opts.Descending = sortable[rng.IntN(len(sortable))], rng.IntN(2) == 0
			dir := "ASC"
			if opts.Descending {
				dir = "DESC"
			}
			order = fmt.Sprintf(sqlNumber, b.arg(opts.SortBy)) + " " + dir + " NULLS LAST, email"
		}
		rows, err := pool.Query(ctx, `SELECT email FROM `+table+` WHERE `+q.cond+` ORDER BY `+order, b.args...)
		if err != nil {
			t.Fatalf("%s: %v", q.cond, err)
		}
		want, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("%s: %v", q.cond, err)
		}
		res, err := s.Search(ctx, def.Name, opts)
		if err != nil {
			t.Fatalf("%q: %v", q.text, err)
		}
		got := make([]string, len(res.Hits))
		for i, h := range res.Hits {
			got[i] = h.Email
		}
		if opts.SortBy == "" {
			slices.Sort(got) // partmap's order is by partition
		}
		if res.Total != int64(len(want)) || !slices.Equal(got, want) {
			t.Errorf("%q sorted by %q (desc %v): partmap found %d %v, SQL %d %v", q.text, opts.SortBy, opts.Descending, res.Total, got, len(want), want)
		}
		found += len(want)
	}
	return found
}
