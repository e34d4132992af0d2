package http_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
	"github.com/partmap/partmap/pebble"
)

// newSearchServer serves a started Pebble store. Its log is discarded:
// searches of an index still building are 503s, which it logs as errors.
func newSearchServer(t *testing.T, opts *pebble.Options) (*httptest.Server, *pebble.Store) {
	t.Helper()
	store := newStore(t, opts)
	srv := serveStore(t, store, &pmhttp.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	start(t, srv.URL)
	return srv, store
}

// searchPage is GET /indexes/{name}/search's reply, with fields present
// told apart from fields absent.
type searchPage struct {
	Total int64
	Hits  []struct {
		EmailAddress string
		Fields       *map[string]string
	}
	NextCursor *string
}

func (p searchPage) emails() []string {
	out := make([]string, len(p.Hits))
	for i, h := range p.Hits {
		out[i] = h.EmailAddress
	}
	return out
}

// searchURL is the search route of index with query and more parameters,
// NAME=VALUE, escaped here.
func searchURL(srvURL, index, query string, params ...string) string {
	q := url.Values{"query": {query}}
	for _, p := range params {
		name, value, _ := strings.Cut(p, "=")
		q.Add(name, value)
	}
	return srvURL + base + "/indexes/" + url.PathEscape(index) + "/search?" + q.Encode()
}

func searchOK(t *testing.T, target string) searchPage {
	t.Helper()
	r := send(t, "GET", target, nil)
	if r.status != 200 {
		t.Fatalf("GET %s: %d %s", target, r.status, r.body)
	}
	return decode[searchPage](t, r)
}

func createIndex(t *testing.T, srvURL, def string) {
	t.Helper()
	if r := send(t, "POST", srvURL+base+"/indexes", strings.NewReader(def), "Content-Type", "application/json"); r.status != 201 {
		t.Fatalf("POST /indexes %s: %d %s", def, r.status, r.body)
	}
}

// waitSearchable waits until index answers searches: its build is done.
func waitSearchable(t *testing.T, srvURL, index string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		r := send(t, "GET", searchURL(srvURL, index, "*", "limit=0"), nil)
		if r.status == 200 {
			return
		}
		if r.status != 503 || time.Now().After(deadline) {
			t.Fatalf("index %s: %d %s", index, r.status, r.body)
		}
	}
}

// seedDesk writes n profiles in one bulk request: names that share
// prefixes, three tiers, visits with ties, some missing and some that are
// no number, so that every order has ties and a tail.
func seedDesk(t *testing.T, srvURL string, n int) {
	t.Helper()
	first := []string{"Alice", "Alina", "Alistair", "Bob", "Bobbie", "Carol", "Dan", "Alison"}
	last := []string{"Liddell", "Alder", "Barker", "Cole", "Alinsky"}
	tiers := []string{"gold", "silver", "bronze"}
	rng := rand.New(rand.NewPCG(36, 4))
	var bulk strings.Builder
	for i := range n {
		fmt.Fprintf(&bulk, `{"emailAddress":"u%04d@example.com","fullName":"%s %s","customerTier":%q`, i,
			first[rng.IntN(len(first))], last[rng.IntN(len(last))], tiers[rng.IntN(len(tiers))])
		switch i % 10 {
		case 0: // no visits
		case 1:
			bulk.WriteString(`,"visits":"n/a"`)
		default:
			fmt.Fprintf(&bulk, `,"visits":"%d"`, rng.IntN(40))
		}
		bulk.WriteString("}\n")
	}
	r := send(t, "POST", srvURL+base+"/customer-profiles/bulk", strings.NewReader(bulk.String()), "Content-Type", "application/x-ndjson")
	if r.status != 200 || !strings.Contains(string(r.body), fmt.Sprintf(`"created":%d,`, n)) {
		t.Fatalf("seeding %d profiles: %d %.300s", n, r.status, r.body)
	}
}

const deskDef = `{"name":"desk","fields":[{"name":"fullName","type":"TEXT"},{"name":"customerTier","type":"TAG"},` +
	`{"name":"visits","type":"NUMERIC","sortable":true},{"name":"notes","type":"TEXT"}]}`

// Following the cursor from the first page to the last gives exactly the
// hits of one page of them all, in the same order, with the same total on
// every page: for the index's own order, for a sortable field with more
// matches than are sorted in memory, and for a field that is not
// sortable.
func TestSearchPagesByCursor(t *testing.T) {
	srv, _ := newSearchServer(t, nil)
	seedDesk(t, srv.URL, 1200)
	createIndex(t, srv.URL, deskDef)
	waitSearchable(t, srv.URL, "desk")

	for _, tc := range []struct {
		name, query string
		order       []string
		pageSize    int
	}{
		{"EveryProfile", "*", nil, 97},
		{"EveryProfileByVisits", "*", []string{"sortBy=visits"}, 113},
		{"EveryProfileByVisitsDescending", "*", []string{"sortBy=visits", "order=desc"}, 250},
		{"PrefixesByName", "ali* | @fullName:bob*", []string{"sortBy=fullName"}, 61},
		{"TagsAndRange", "@customerTier:{gold|silver} @visits:[(5 30]", []string{"sortBy=visits", "order=desc"}, 7},
		{"Negation", "-@customerTier:{bronze} alinsky", nil, 10},
		{"Nothing", "@visits:[1000 +inf]", nil, 5},
	} {
		t.Run("OK"+tc.name, func(t *testing.T) {
			all := searchOK(t, searchURL(srv.URL, "desk", tc.query, append(tc.order, "limit=10000", "noContent=true")...))
			if all.NextCursor != nil || int64(len(all.Hits)) != all.Total {
				t.Fatalf("one page of everything: total %d, %d hits, next %v", all.Total, len(all.Hits), all.NextCursor)
			}
			if tc.name != "Nothing" && all.Total < int64(2*tc.pageSize) {
				t.Fatalf("%d matches: too few for pages of %d to test anything", all.Total, tc.pageSize)
			}
			var paged []string
			pages := 0
			for cursor := ""; ; pages++ {
				params := append(slices.Clone(tc.order), fmt.Sprintf("limit=%d", tc.pageSize), "noContent=true")
				if cursor != "" {
					params = append(params, "cursor="+cursor)
				}
				p := searchOK(t, searchURL(srv.URL, "desk", tc.query, params...))
				if p.Total != all.Total {
					t.Fatalf("page %d: total %d, want %d", pages+1, p.Total, all.Total)
				}
				if p.NextCursor != nil && len(p.Hits) != tc.pageSize {
					t.Fatalf("page %d has %d hits and a next page", pages+1, len(p.Hits))
				}
				paged = append(paged, p.emails()...)
				if p.NextCursor == nil {
					break
				}
				if int64(len(paged)) > all.Total {
					t.Fatalf("page %d: %d hits so far, of %d", pages+1, len(paged), all.Total)
				}
				cursor = *p.NextCursor
			}
			if want := all.emails(); !slices.Equal(paged, want) {
				t.Fatalf("%d pages gave %d hits, not the %d of one page in its order", pages+1, len(paged), len(want))
			}
			if want := int(all.Total+int64(tc.pageSize)-1) / tc.pageSize; tc.name != "Nothing" && pages+1 != want {
				t.Errorf("%d pages of %d for %d hits, want %d", pages+1, tc.pageSize, all.Total, want)
			}
		})
	}

	// The Go client pages the same way.
	t.Run("OKClient", func(t *testing.T) {
		cl := newClient(t, srv.URL, nil)
		ctx := context.Background()
		all, err := cl.Search(ctx, "desk", partmap.SearchOptions{Query: "ali*", SortBy: "visits", Descending: true, Limit: partmap.MaxSearchLimit, NoContent: true})
		if err != nil {
			t.Fatal(err)
		}
		var paged []partmap.SearchHit
		for opts := (partmap.SearchOptions{Query: "ali*", SortBy: "visits", Descending: true, Limit: 100, NoContent: true}); ; {
			res, err := cl.Search(ctx, "desk", opts)
			if err != nil {
				t.Fatal(err)
			}
			paged = append(paged, res.Hits...)
			if res.NextCursor == "" {
				break
			}
			opts.Cursor = res.NextCursor
		}
		if !slices.EqualFunc(paged, all.Hits, func(a, b partmap.SearchHit) bool { return a.Email == b.Email }) || len(paged) == 0 {
			t.Errorf("the client's pages: %d hits, one page %d", len(paged), len(all.Hits))
		}
	})
}

// A cursor is bound to its query, its order and its index, and to the
// map's layout: any other use of it is refused.
func TestSearchCursorIsBound(t *testing.T) {
	srv, _ := newSearchServer(t, nil)
	seedDesk(t, srv.URL, 60)
	createIndex(t, srv.URL, deskDef)
	createIndex(t, srv.URL, strings.Replace(deskDef, `"desk"`, `"desk2"`, 1))
	waitSearchable(t, srv.URL, "desk")
	waitSearchable(t, srv.URL, "desk2")
	next := func(index, query string, params ...string) string {
		t.Helper()
		p := searchOK(t, searchURL(srv.URL, index, query, append(params, "limit=5")...))
		if p.NextCursor == nil {
			t.Fatalf("%s %q %v: one page only", index, query, params)
		}
		return *p.NextCursor
	}
	unsorted := next("desk", "@customerTier:{gold|silver}")
	sorted := next("desk", "*", "sortBy=visits")

	// The same query and order, spelt otherwise, takes the cursor: it is
	// bound to the query as parsed. So do another limit and RETURN.
	searchOK(t, searchURL(srv.URL, "desk", "@customerTier:{ GOLD | silver }", "cursor="+unsorted, "limit=7", "return=fullName"))
	searchOK(t, searchURL(srv.URL, "desk", "*", "sortBy=visits", "order=asc", "cursor="+sorted))

	for _, tc := range []struct {
		name, index, query string
		params             []string
	}{
		{"ErrOtherQuery", "desk", "@customerTier:{gold}", []string{"cursor=" + unsorted}},
		{"ErrOtherIndex", "desk2", "@customerTier:{gold|silver}", []string{"cursor=" + unsorted}},
		{"ErrOtherOrder", "desk", "*", []string{"sortBy=visits", "order=desc", "cursor=" + sorted}},
		{"ErrSortedCursorUnsorted", "desk", "*", []string{"cursor=" + sorted}},
		{"ErrOtherSortField", "desk", "*", []string{"sortBy=fullName", "cursor=" + sorted}},
		{"ErrDamaged", "desk", "@customerTier:{gold|silver}", []string{"cursor=" + unsorted[:len(unsorted)-2] + "AA"}},
		{"ErrNotACursor", "desk", "*", []string{"cursor=not a cursor"}},
		{"ErrListingCursor", "desk", "*", []string{"cursor=" + listingCursor(t, srv.URL)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := send(t, "GET", searchURL(srv.URL, tc.index, tc.query, tc.params...), nil)
			if p := r.problem(t); r.status != 400 || p["type"] != "urn:partmap:problem:invalid" || !strings.Contains(p["detail"].(string), "cursor") {
				t.Errorf("%d %v", r.status, p)
			}
		})
	}

	// After a resize, every cursor is stale: it names a place in the old
	// layout.
	resize(t, srv.URL+base, 1500)
	for _, c := range []struct{ query, cursor, sortBy string }{{"@customerTier:{gold|silver}", unsorted, ""}, {"*", sorted, "sortBy=visits"}} {
		params := []string{"cursor=" + c.cursor}
		if c.sortBy != "" {
			params = append(params, c.sortBy)
		}
		if r := send(t, "GET", searchURL(srv.URL, "desk", c.query, params...), nil); r.status != 400 {
			t.Errorf("a cursor of %q issued before a resize: %d %s", c.query, r.status, r.body)
		}
	}
	searchOK(t, searchURL(srv.URL, "desk", "*", "sortBy=visits"))
}

// listingCursor is a cursor of a plain listing of profiles.
func listingCursor(t *testing.T, srvURL string) string {
	t.Helper()
	page := decode[struct{ NextCursor string }](t, send(t, "GET", srvURL+base+"/customer-profiles?limit=1", nil))
	if page.NextCursor == "" {
		t.Fatal("a listing of one profile a page has no next page")
	}
	return page.NextCursor
}

// Every bad parameter is a 400 whose detail says what is wrong, and no
// refused request writes anything: the change feed stays empty and the
// indexes stay as they were.
func TestSearchRefusals(t *testing.T) {
	srv, _ := newSearchServer(t, nil)
	seedDesk(t, srv.URL, 30)
	createIndex(t, srv.URL, deskDef)
	waitSearchable(t, srv.URL, "desk")
	feed := decode[struct{ Next string }](t, send(t, "GET", srv.URL+base+"/changes?after=now", nil)).Next
	indexes := send(t, "GET", srv.URL+base+"/indexes", nil).body

	for _, tc := range []struct {
		name   string
		target string
		code   string
		detail string
	}{
		{"ErrNoQuery", srv.URL + base + "/indexes/desk/search", "invalid", "query parameter is required"},
		{"ErrEmptyQuery", searchURL(srv.URL, "desk", ""), "invalid", "query is empty"},
		{"ErrQueryTwice", searchURL(srv.URL, "desk", "ali*", "query=bob*"), "invalid", "query is given 2 times"},
		{"ErrSyntax", searchURL(srv.URL, "desk", "(ali | bob"), "invalid", "at offset 10"},
		{"ErrUnknownField", searchURL(srv.URL, "desk", "@city:{Oslo}"), "invalid", "Unknown field at offset 0 near city"},
		{"ErrFieldType", searchURL(srv.URL, "desk", "@visits:{3}"), "invalid", "Expected a TAG field at offset 0 near visits: visits is a NUMERIC field"},
		{"ErrShortPrefix", searchURL(srv.URL, "desk", "a*"), "invalid", "Prefix too short at offset 0"},
		{"ErrBadRange", searchURL(srv.URL, "desk", "@visits:[9 1]"), "invalid", "min > max"},
		{"ErrStopWordsOnly", searchURL(srv.URL, "desk", "the"), "invalid", "stop words"},
		{"ErrPhrase", searchURL(srv.URL, "desk", `"alice liddell"`), "invalid", "phrase"},
		{"ErrQueryNotUTF8", srv.URL + base + "/indexes/desk/search?query=%FF", "invalid", "not valid UTF-8"},
		{"ErrSortByUnknown", searchURL(srv.URL, "desk", "*", "sortBy=city"), "invalid", "Property `city` not loaded nor in schema"},
		{"ErrOrder", searchURL(srv.URL, "desk", "*", "sortBy=visits", "order=down"), "invalid", `order must be asc or desc, not "down"`},
		{"ErrOrderWithoutSortBy", searchURL(srv.URL, "desk", "*", "order=desc"), "invalid", "order needs sortBy"},
		{"ErrLimitNegative", searchURL(srv.URL, "desk", "*", "limit=-1"), "invalid", `limit must be an integer from 0 to 10000, not "-1"`},
		{"ErrLimitTooLarge", searchURL(srv.URL, "desk", "*", "limit=10001"), "invalid", "from 0 to 10000"},
		{"ErrLimitNotNumber", searchURL(srv.URL, "desk", "*", "limit=ten"), "invalid", `not "ten"`},
		{"ErrOffsetNegative", searchURL(srv.URL, "desk", "*", "offset=-5"), "invalid", `offset must be an integer of 0 or more, not "-5"`},
		{"ErrTooDeep", searchURL(srv.URL, "desk", "*", "offset=999995", "limit=10"), "invalid", "at most 1000000"},
		{"ErrCursorAndOffset", searchURL(srv.URL, "desk", "*", "offset=5", "cursor=AAAA"), "invalid", "a cursor takes the place of offset"},
		{"ErrReturnTwice", searchURL(srv.URL, "desk", "*", "return=fullName,fullName"), "invalid", `return names "fullName" twice`},
		{"ErrReturnEmptyName", searchURL(srv.URL, "desk", "*", "return=fullName,"), "invalid", "names an empty field"},
		{"ErrReturnNotUTF8", srv.URL + base + "/indexes/desk/search?query=*&return=%FF", "invalid-utf8", "not valid UTF-8"},
		{"ErrReturnAndNoContent", searchURL(srv.URL, "desk", "*", "return=fullName", "noContent=true"), "invalid", "noContent and return cannot go together"},
		{"ErrNoContent", searchURL(srv.URL, "desk", "*", "noContent=1"), "invalid", `noContent is true or false, not "1"`},
		{"ErrUnknownParameter", searchURL(srv.URL, "desk", "*", "sort=visits"), "invalid", `unknown query parameter "sort"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := send(t, "GET", tc.target, nil)
			p := r.problem(t)
			if r.status != 400 || p["type"] != "urn:partmap:problem:"+tc.code || !strings.Contains(fmt.Sprint(p["detail"]), tc.detail) {
				t.Errorf("GET %s: %d %v; want 400 %s saying %q", tc.target, r.status, p, tc.code, tc.detail)
			}
		})
	}

	for _, tc := range []struct {
		name, body, code, detail string
	}{
		{"ErrNoFields", `{"name":"x","fields":[]}`, "invalid", "at least one field"},
		{"ErrNoName", `{"fields":[{"name":"a","type":"TAG"}]}`, "invalid", "index name is empty"},
		{"ErrReservedName", `{"name":"profiles","fields":[{"name":"a","type":"TAG"}]}`, "invalid", "choose another name"},
		{"ErrTakenName", deskDef, "exists", "Index already exists"},
		{"ErrSpaceInName", `{"name":"my desk","fields":[{"name":"a","type":"TAG"}]}`, "invalid", "white space"},
		{"ErrUnknownType", `{"name":"x","fields":[{"name":"a","type":"GEO"}]}`, "invalid", `want TEXT, TAG or NUMERIC`},
		{"ErrFieldTwice", `{"name":"x","fields":[{"name":"a","type":"TAG"},{"name":"a","type":"TEXT"}]}`, "invalid", `"a" is declared twice`},
		{"ErrNoStemOnTag", `{"name":"x","fields":[{"name":"a","type":"TAG","noStem":true}]}`, "invalid", "only a TEXT field takes NOSTEM"},
		{"ErrSeparator", `{"name":"x","fields":[{"name":"a","type":"TAG","separator":";;"}]}`, "invalid", "must be one character"},
		{"ErrUnknownMember", `{"name":"x","on":"HASH","fields":[{"name":"a","type":"TAG"}]}`, "malformed-json", `unknown field "on"`},
		{"ErrTwoValues", `{"name":"x","fields":[{"name":"a","type":"TAG"}]}{}`, "malformed-json", "more than one index definition"},
		{"ErrNotJSON", `name=x`, "malformed-json", "not the JSON it should be"},
		{"ErrNotUTF8", "{\"name\":\"\xff\",\"fields\":[{\"name\":\"a\",\"type\":\"TAG\"}]}", "invalid-utf8", "not valid UTF-8"},
	} {
		t.Run("Create"+tc.name, func(t *testing.T) {
			r := send(t, "POST", srv.URL+base+"/indexes", strings.NewReader(tc.body), "Content-Type", "application/json")
			p := r.problem(t)
			if r.status/100 != 4 || p["type"] != "urn:partmap:problem:"+tc.code || !strings.Contains(fmt.Sprint(p["detail"]), tc.detail) {
				t.Errorf("POST %s: %d %v; want %s saying %q", tc.body, r.status, p, tc.code, tc.detail)
			}
		})
	}
	t.Run("DropErrLegacy", func(t *testing.T) {
		r := send(t, "DELETE", srv.URL+base+"/indexes/profiles", nil)
		if p := r.problem(t); r.status != 400 || !strings.Contains(fmt.Sprint(p["detail"]), "cannot be dropped") {
			t.Errorf("%d %v", r.status, p)
		}
	})

	if got := send(t, "GET", srv.URL+base+"/indexes", nil).body; string(got) != string(indexes) {
		t.Errorf("the indexes changed:\n%s\nwas\n%s", got, indexes)
	}
	r := send(t, "GET", srv.URL+base+"/changes?after="+feed, nil)
	if changes := decode[struct{ Changes []any }](t, r).Changes; r.status != 200 || len(changes) != 0 {
		t.Errorf("refused requests wrote: %d %s", r.status, r.body)
	}
}

// An unknown index is 404 to a search and to a drop; so is a dropped one.
func TestSearchUnknownIndex(t *testing.T) {
	srv, _ := newSearchServer(t, nil)
	createIndex(t, srv.URL, deskDef)
	waitSearchable(t, srv.URL, "desk")
	if r := send(t, "DELETE", srv.URL+base+"/indexes/desk", nil); r.status != 200 || strings.TrimSpace(string(r.body)) != `{"dropped":"desk"}` {
		t.Fatalf("drop: %d %s", r.status, r.body)
	}
	for _, tc := range []struct{ method, target string }{
		{"GET", searchURL(srv.URL, "nope", "*")},
		{"GET", searchURL(srv.URL, "desk", "*")},
		{"GET", searchURL(srv.URL, "Desk", "*")},
		{"DELETE", srv.URL + base + "/indexes/nope"},
		{"DELETE", srv.URL + base + "/indexes/desk"},
	} {
		r := send(t, tc.method, tc.target, nil)
		if p := r.problem(t); r.status != 404 || p["type"] != "urn:partmap:problem:not-found" || p["detail"] != "Unknown Index name" {
			t.Errorf("%s %s: %d %v", tc.method, tc.target, r.status, p)
		}
	}
	// HEAD answers the same status, without a body.
	if r := send(t, "HEAD", searchURL(srv.URL, "nope", "*"), nil); r.status != 404 || len(r.body) != 0 {
		t.Errorf("HEAD of an unknown index's search: %d %q", r.status, r.body)
	}
}

// An index answers no search until its build has indexed every profile
// that existed when it was created: 503 with Retry-After meanwhile, and
// GET /indexes says how far it is. Here the build is held up by a
// writer that holds one partition's lock.
func TestSearchWhileBuilding(t *testing.T) {
	srv, store := newSearchServer(t, failFast())
	seedDesk(t, srv.URL, 40)
	held := "u0007@example.com"
	release := holdPartition(t, store, held)
	defer func() {
		if release != nil {
			release()
		}
	}()
	createIndex(t, srv.URL, deskDef)

	r := send(t, "GET", searchURL(srv.URL, "desk", "ali*"), nil)
	if p := r.problem(t); r.status != 503 || p["type"] != "urn:partmap:problem:unavailable" || r.header.Get("Retry-After") == "" ||
		!strings.Contains(fmt.Sprint(p["detail"]), `index "desk" is still being built`) {
		t.Fatalf("a search while the index builds: %d %v, Retry-After %q", r.status, p, r.header.Get("Retry-After"))
	}
	type info struct {
		Name     string
		NumDocs  int64
		Building bool
		Progress float64
	}
	list := decode[struct{ Indexes []info }](t, send(t, "GET", srv.URL+base+"/indexes", nil))
	if desk := list.Indexes[len(list.Indexes)-1]; desk.Name != "desk" || !desk.Building || desk.Progress >= 1 || desk.NumDocs != 0 {
		t.Fatalf("GET /indexes while desk builds: %+v", list.Indexes)
	}

	release()
	release = nil
	waitSearchable(t, srv.URL, "desk")
	list = decode[struct{ Indexes []info }](t, send(t, "GET", srv.URL+base+"/indexes", nil))
	if desk := list.Indexes[len(list.Indexes)-1]; desk.Building || desk.Progress != 1 || desk.NumDocs != 40 {
		t.Fatalf("GET /indexes once desk is built: %+v", list.Indexes)
	}
	// The held partition's profiles were indexed too.
	p := searchOK(t, searchURL(srv.URL, "desk", "*", "limit=100", "noContent=true"))
	if p.Total != 40 || !slices.Contains(p.emails(), held) {
		t.Errorf("after the build: total %d, %v", p.Total, p.emails())
	}
}

// A hit carries the whole profile by default, RETURN's fields only (in
// RETURN's order, through the Go client), an empty object with return=,
// and no fields at all with noContent.
func TestSearchReplyShapes(t *testing.T) {
	srv, _ := newSearchServer(t, nil)
	alice := `{"emailAddress":"alice@example.com","fullName":"Alice Liddell","customerTier":"gold","visits":"12","notes":"likes rabbits"}`
	if r := send(t, "PUT", srv.URL+base+"/customer-profile", strings.NewReader(alice)); r.status != 201 {
		t.Fatalf("PUT: %d %s", r.status, r.body)
	}
	createIndex(t, srv.URL, deskDef)
	waitSearchable(t, srv.URL, "desk")

	for _, tc := range []struct {
		name   string
		params []string
		want   string
	}{
		{"OKWholeProfile", nil,
			`{"total":1,"hits":[{"emailAddress":"alice@example.com","fields":{"customerTier":"gold","emailAddress":"alice@example.com","fullName":"Alice Liddell","notes":"likes rabbits","visits":"12"}}],"nextCursor":null}`},
		{"OKReturn", []string{"return=visits,nickname,fullName"},
			`{"total":1,"hits":[{"emailAddress":"alice@example.com","fields":{"fullName":"Alice Liddell","visits":"12"}}],"nextCursor":null}`},
		{"OKReturnMissingOnly", []string{"return=nickname"},
			`{"total":1,"hits":[{"emailAddress":"alice@example.com","fields":{}}],"nextCursor":null}`},
		{"OKReturnNone", []string{"return="},
			`{"total":1,"hits":[{"emailAddress":"alice@example.com","fields":{}}],"nextCursor":null}`},
		{"OKNoContent", []string{"noContent=true"},
			`{"total":1,"hits":[{"emailAddress":"alice@example.com"}],"nextCursor":null}`},
		{"OKOnlyTotal", []string{"limit=0"},
			`{"total":1,"hits":[],"nextCursor":null}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := send(t, "GET", searchURL(srv.URL, "desk", "ali*", tc.params...), nil)
			if got := strings.TrimSpace(string(r.body)); r.status != 200 || got != tc.want || r.header.Get("Content-Type") != "application/json" {
				t.Errorf("%d %s\nwant %s", r.status, got, tc.want)
			}
		})
	}

	t.Run("OKClientKeepsReturnOrder", func(t *testing.T) {
		cl := newClient(t, srv.URL, nil)
		for _, tc := range []struct {
			opts partmap.SearchOptions
			want []partmap.FieldValue
		}{
			{partmap.SearchOptions{Query: "ali*", Return: []string{"visits", "nickname", "fullName"}},
				[]partmap.FieldValue{{Name: "visits", Value: "12"}, {Name: "fullName", Value: "Alice Liddell"}}},
			{partmap.SearchOptions{Query: "ali*", Return: []string{}}, []partmap.FieldValue{}},
			{partmap.SearchOptions{Query: "ali*", NoContent: true}, nil},
		} {
			res, err := cl.Search(context.Background(), "desk", tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Hits) != 1 || !slices.Equal(res.Hits[0].Fields, tc.want) || (res.Hits[0].Fields == nil) != (tc.want == nil) {
				t.Errorf("%+v: %+v, want %+v", tc.opts, res.Hits, tc.want)
			}
		}
	})
}
