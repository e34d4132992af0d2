package http_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/auth"
	pmhttp "github.com/partmap/partmap/http"
)

// The console's files are open, typed, revalidated and locked down by a
// policy that forbids inline script; the rest of the server is unchanged.
func TestConsoleFiles(t *testing.T) {
	_, tokens := newTokens(t, auth.ScopeAdmin)
	store := newStore(t, nil)
	srv := serveStore(t, store, &pmhttp.ServerOptions{Tokens: tokens})

	for _, tc := range []struct{ path, contentType string }{
		{"/", "text/html; charset=utf-8"},
		{"/console/console.js", "text/javascript; charset=utf-8"},
		{"/console/console.css", "text/css; charset=utf-8"},
		{"/console/favicon.svg", "image/svg+xml"},
	} {
		t.Run("OK"+tc.path, func(t *testing.T) {
			r := send(t, "GET", srv.URL+tc.path, nil) // no token: the files hold no data
			if r.status != 200 || len(r.body) == 0 {
				t.Fatalf("GET %s: %d, %d bytes", tc.path, r.status, len(r.body))
			}
			for name, want := range map[string]string{
				"Content-Type":           tc.contentType,
				"X-Content-Type-Options": "nosniff",
				"Cache-Control":          "no-cache",
			} {
				if got := r.header.Get(name); got != want {
					t.Errorf("%s: %s %q, want %q", tc.path, name, got, want)
				}
			}
			csp := r.header.Get("Content-Security-Policy")
			for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
				if !strings.Contains(csp, want) {
					t.Errorf("%s: Content-Security-Policy %q lacks %q", tc.path, csp, want)
				}
			}
			if strings.Contains(csp, "unsafe") {
				t.Errorf("%s: Content-Security-Policy %q allows something unsafe", tc.path, csp)
			}
			etag := r.header.Get("ETag")
			if r := send(t, "GET", srv.URL+tc.path, nil, "If-None-Match", etag); etag == "" || r.status != 304 {
				t.Errorf("%s: revalidating ETag %q: %d, want 304", tc.path, etag, r.status)
			}
		})
	}

	t.Run("ErrUnknownFile", func(t *testing.T) {
		for _, path := range []string{"/console/nope.js", "/console/index.html", "/console/", "/console/a/b", "/index.html"} {
			r := send(t, "GET", srv.URL+path, nil)
			if p := r.problem(t); r.status != 404 || p["type"] != "urn:partmap:problem:not-found" {
				t.Errorf("GET %s: %d %v, want a 404 problem", path, r.status, p)
			}
		}
	})
	t.Run("ErrMethod", func(t *testing.T) {
		for _, path := range []string{"/", "/console/console.js"} {
			r := send(t, "POST", srv.URL+path, nil)
			if p := r.problem(t); r.status != 405 || r.header.Get("Allow") != "GET, HEAD" || p["type"] != "urn:partmap:problem:method-not-allowed" {
				t.Errorf("POST %s: %d, Allow %q, %v", path, r.status, r.header.Get("Allow"), p)
			}
		}
	})
	t.Run("APIStillNeedsToken", func(t *testing.T) {
		if r := send(t, "GET", srv.URL+base+"/partitions", nil); r.status != 401 {
			t.Errorf("GET /partitions without a token: %d, want 401", r.status)
		}
	})

	// Static checks that keep the page within its policy and its API.
	t.Run("NoInlineCode", func(t *testing.T) {
		html, err := os.ReadFile("console/index.html")
		if err != nil {
			t.Fatal(err)
		}
		for _, tag := range regexp.MustCompile(`(?i)<script\b[^>]*>`).FindAllString(string(html), -1) {
			if !strings.Contains(tag, " src=") {
				t.Errorf("index.html has an inline script %s; the policy would block it", tag)
			}
		}
		if m := regexp.MustCompile(`(?i)<[^>]*\s(on[a-z]+|style)=`).FindString(string(html)); m != "" {
			t.Errorf("index.html has an inline handler or style: %s", m)
		}
		js, err := os.ReadFile("console/console.js")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(js), "'"+strings.TrimPrefix(pmhttp.BasePath, "/")+"'") {
			t.Errorf("console.js does not call the API at %s", pmhttp.BasePath)
		}
	})
}

// The console's routes are labelled by their patterns, so the metrics
// label set stays small whatever file is asked for.
func TestConsoleMetrics(t *testing.T) {
	srv, _ := newServer(t, nil)
	send(t, "GET", srv.URL+"/", nil)
	send(t, "GET", srv.URL+"/console/console.js", nil)
	send(t, "GET", srv.URL+"/console/no-such-file-1", nil)
	send(t, "GET", srv.URL+"/console/no-such-file-2", nil)
	r := send(t, "GET", srv.URL+"/metrics", nil)
	for _, want := range []string{
		`partmap_http_requests_total{route="GET /{$}",status="200"} 1`,
		`partmap_http_requests_total{route="GET /console/{name}",status="200"} 1`,
		`partmap_http_requests_total{route="GET /console/{name}",status="404"} 2`,
	} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(string(r.body), "no-such-file") {
		t.Error("/metrics names a requested path")
	}
}

// The console test drives a real browser. Chromium comes from Debian's
// package, which `make test` installs when it is missing.
func chromiumPath(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("the console test needs headless Chromium, which is not installed (%v); `make test` installs Debian's chromium package", err)
	}
	return path
}

// TestConsole uses the console as a person would, in headless Chromium,
// against a real server over Pebble that requires a token: it enters the
// token, starts the directory, creates, finds, edits (and meets a 412),
// browses and deletes a profile, and watches the heatmap follow. Set
// PARTMAP_CONSOLE_SCREENSHOT=FILE to also write the README's screenshot.
func TestConsole(t *testing.T) {
	exe := chromiumPath(t)
	byScope, tokens := newTokens(t, auth.ScopeAdmin)
	tok := byScope[auth.ScopeAdmin]
	store := newStore(t, nil)
	srv := serveStore(t, store, &pmhttp.ServerOptions{Tokens: tokens, Logger: newTextLogger(io.Discard)})
	api := srv.URL + base
	auth := bearer(tok)

	p := openPage(t, exe, 60*time.Second)
	const typed = " Ada.Lovelace@Example.COM"
	email, part, err := partmap.Locate(typed, partmap.DefaultPartitions)
	if err != nil {
		t.Fatal(err)
	}
	cell := fmt.Sprintf(`[data-partition=%q]`, part)

	// Without a token every API call is 401, and the page asks for one.
	p.do("load the console", chromedp.Navigate(srv.URL+"/"))
	p.waitNotice("auth", "unauthorized", "needs a bearer token")
	p.until("the token field is highlighted", q("#token-form")+".classList.contains('attention')")

	// With it, the directory answers that it is not started, and the
	// console offers to start it.
	p.do("enter the token", chromedp.SendKeys(chromedp.CSS("#token"), tok), chromedp.Click(chromedp.CSS(`#token-form button[type="submit"]`)))
	p.waitNotice("warn", "not-started", "not been started")
	if got := evaluate[string](p, `sessionStorage.getItem('partmap.token')`); got != tok {
		t.Fatalf("sessionStorage holds %q, want the token", got)
	}
	p.do("start the directory", chromedp.Click(chromedp.CSS("#notice-action")))
	p.waitNotice("ok", "", "directory is started")
	p.until("the heatmap is drawn", q("#heatmap")+".dataset.loaded && "+q(cell)+".dataset.profiles === '0'")
	if n := evaluate[int](p, `document.querySelectorAll('#heatmap .cell').length`); n != partmap.DefaultPartitions {
		t.Fatalf("the heatmap has %d cells, want %d", n, partmap.DefaultPartitions)
	}

	// Other profiles, none in Ada's partition, so that her cell goes from
	// 0 to 1 and back; 30 of them make two pages of 25.
	var seeds []string
	var bulk strings.Builder
	for i := 0; len(seeds) < 30; i++ {
		e := fmt.Sprintf("seed%02d@example.com", i)
		if partmap.PartitionOf(e, partmap.DefaultPartitions) == part {
			continue
		}
		seeds = append(seeds, e)
		fmt.Fprintf(&bulk, `{"emailAddress":%q,"fullName":"Seed %d"}`+"\n", e, i)
	}
	if r := send(t, "POST", api+"/customer-profiles/bulk", strings.NewReader(bulk.String()), auth...); r.status != 200 || !strings.Contains(string(r.body), `"created":30,`) {
		t.Fatalf("seeding: %d %s", r.status, r.body)
	}

	// Create through the form.
	p.do("open the new-profile form", chromedp.Click(chromedp.CSS("#new-button")))
	p.do("fill it in", fillNewProfile(typed, "Ada Lovelace", "Babbage & Co", "gold", "notes", `first "programmer" <1843>`))
	p.waitNotice("ok", "", "Created "+email)
	p.waitText("#view-email", email)
	p.until("Ada's cell counts 1", q(cell)+".dataset.profiles === '1'")
	if got := evaluate[string](p, q("#view-partition")+".textContent"); got != part.String() {
		t.Errorf("the console places %s in %s; partmap.Locate says %s", email, got, part)
	}
	if got := evaluate[string](p, q(cell)+".title"); got != part.String()+": 1 profile" {
		t.Errorf("the cell's tooltip is %q", got)
	}
	p.do("click Ada's cell", chromedp.Click(chromedp.CSS(cell)))
	p.waitText("#heatmap-detail", part.String()+": 1 profile")
	r := send(t, "GET", api+"/customer-profile?emailAddress="+email, nil, auth...)
	want := `{"emailAddress":"` + email + `","fullName":"Ada Lovelace","companyName":"Babbage & Co","customerTier":"gold","notes":"first \"programmer\" <1843>"}`
	if r.status != 200 || strings.TrimSpace(string(r.body)) != want {
		t.Fatalf("the stored profile: %d %s, want %s", r.status, r.body, want)
	}

	// Find: a miss shows the server's detail, a hit shows the profile.
	p.do("look up a missing profile",
		chromedp.SendKeys(chromedp.CSS("#find-email"), "nobody@example.com"),
		chromedp.Click(chromedp.CSS(`#find-form button[type="submit"]`)))
	p.waitNotice("error", "not-found", "no profile for nobody@example.com")
	p.until("the view is cleared", q("#profile-view")+".hidden")
	p.do("look up Ada in capitals",
		emptyField("#find-email"),
		chromedp.SendKeys(chromedp.CSS("#find-email"), "ADA.LOVELACE@example.com"),
		chromedp.Click(chromedp.CSS(`#find-form button[type="submit"]`)))
	p.waitText("#view-email", email)
	p.waitText(`#view-fields dd[data-field="companyName"]`, "Babbage & Co")
	p.waitText(`#view-fields dd[data-field="notes"]`, `first "programmer" <1843>`)
	if got, want := evaluate[string](p, q("#view-etag")+".textContent"), r.header.Get("ETag"); got != want {
		t.Errorf("the console shows ETag %q, the server %q", got, want)
	}

	// Someone else changes Ada after the console loaded her: the console's
	// edit carries the old ETag, so it is refused and says so.
	changed := `{"emailAddress":"` + email + `","fullName":"Ada Lovelace","companyName":"Babbage & Co","customerTier":"platinum","notes":"first \"programmer\" <1843>"}`
	if r := send(t, "PUT", api+"/customer-profile", strings.NewReader(changed), auth...); r.status != 200 {
		t.Fatalf("the concurrent change: %d %s", r.status, r.body)
	}
	p.do("edit the company",
		chromedp.Click(chromedp.CSS("#edit-button")),
		emptyField("#edit-companyName"),
		chromedp.SendKeys(chromedp.CSS("#edit-companyName"), "Analytical Engines"),
		chromedp.Click(chromedp.CSS("#save-button")))
	p.waitNotice("warn", "precondition-failed", "changed or deleted since you loaded it")
	if r := send(t, "GET", api+"/customer-profile?emailAddress="+email, nil, auth...); strings.TrimSpace(string(r.body)) != changed {
		t.Fatalf("a refused edit wrote: %s", r.body)
	}
	p.do("reload Ada", chromedp.Click(chromedp.CSS("#notice-action")))
	p.waitText(`#view-fields dd[data-field="customerTier"]`, "platinum")
	p.do("edit the company again",
		chromedp.Click(chromedp.CSS("#edit-button")),
		emptyField("#edit-companyName"),
		chromedp.SendKeys(chromedp.CSS("#edit-companyName"), "Analytical Engines"),
		chromedp.Click(chromedp.CSS("#save-button")))
	p.waitNotice("ok", "", "Saved "+email)
	p.waitText(`#view-fields dd[data-field="companyName"]`, "Analytical Engines")
	r = send(t, "GET", api+"/customer-profile?emailAddress="+email, nil, auth...)
	if want := strings.Replace(changed, "Babbage & Co", "Analytical Engines", 1); strings.TrimSpace(string(r.body)) != want {
		t.Fatalf("after the edit the server has %s, want %s", r.body, want)
	}
	if got := evaluate[string](p, q("#view-etag")+".textContent"); got != r.header.Get("ETag") {
		t.Errorf("after the edit the console shows ETag %q, the server %q", got, r.header.Get("ETag"))
	}

	// Browse: 31 profiles are a page of 25 and a page of 6, together each
	// profile once.
	rows := `[...document.querySelectorAll('#browse-rows tr[data-email]')].map(tr => tr.dataset.email)`
	p.do("go to the first page", chromedp.Click(chromedp.CSS("#browse-first")))
	p.until("page 1 is listed", q("#browse-table")+".dataset.page === '1' && "+rows+".length === 25")
	listed := evaluate[[]string](p, rows)
	p.do("go to the next page", chromedp.Click(chromedp.CSS("#browse-next")))
	p.until("page 2 is listed", q("#browse-table")+".dataset.page === '2' && "+rows+".length === 6 && "+q("#browse-next")+".disabled")
	listed = append(listed, evaluate[[]string](p, rows)...)
	slices.Sort(listed)
	all := slices.Sorted(slices.Values(append(slices.Clone(seeds), email)))
	if !slices.Equal(listed, all) {
		t.Errorf("two pages listed %v, want %v", listed, all)
	}
	p.do("go back", chromedp.Click(chromedp.CSS("#browse-prev")))
	p.until("page 1 is listed again", q("#browse-table")+".dataset.page === '1' && "+rows+".length === 25 && "+q("#browse-prev")+".disabled")

	// Change the email: the profile moves, the view follows it, and a
	// taken address is refused with a way to open its profile.
	moved := "countess.of.lovelace@example.com"
	p.do("change Ada's email",
		chromedp.Click(chromedp.CSS("#rename-button")),
		emptyField("#rename-to"),
		chromedp.SendKeys(chromedp.CSS("#rename-to"), " Countess.of.Lovelace@Example.com"),
		chromedp.Click(chromedp.CSS("#rename-yes")))
	p.waitNotice("ok", "", "Moved "+email+" to "+moved)
	p.waitText("#view-email", moved)
	if r := send(t, "GET", api+"/customer-profile?emailAddress="+moved, nil, auth...); r.status != 200 || evaluate[string](p, q("#view-etag")+".textContent") != r.header.Get("ETag") {
		t.Fatalf("after the move: %d %s, the console shows ETag %q", r.status, r.body, evaluate[string](p, q("#view-etag")+".textContent"))
	}
	if r := send(t, "GET", api+"/customer-profile?emailAddress="+email, nil, auth...); r.status != 404 {
		t.Fatalf("the old email after the move: %d %s", r.status, r.body)
	}
	p.do("move it onto a taken email",
		chromedp.Click(chromedp.CSS("#rename-button")),
		emptyField("#rename-to"),
		chromedp.SendKeys(chromedp.CSS("#rename-to"), seeds[0]),
		chromedp.Click(chromedp.CSS("#rename-yes")))
	p.waitNotice("warn", "exists", "already has a profile")
	p.do("move it back",
		emptyField("#rename-to"),
		chromedp.SendKeys(chromedp.CSS("#rename-to"), email),
		chromedp.Click(chromedp.CSS("#rename-yes")))
	p.waitNotice("ok", "", "Moved "+moved+" to "+email)
	p.waitText("#view-email", email)

	// Delete, with a confirmation, and the cell empties again.
	p.do("delete Ada", chromedp.Click(chromedp.CSS("#delete-button")), chromedp.Click(chromedp.CSS("#delete-yes"), chromedp.NodeVisible))
	p.waitNotice("ok", "", "Deleted "+email)
	p.until("Ada's cell counts 0 again", q(cell)+".dataset.profiles === '0' && "+q("#profile-view")+".hidden")
	if r := send(t, "GET", api+"/customer-profile?emailAddress="+email, nil, auth...); r.status != 404 {
		t.Fatalf("after the delete: %d %s", r.status, r.body)
	}

	p.screenshot("console.png")
	p.checkConsole()
	if path := os.Getenv("PARTMAP_CONSOLE_SCREENSHOT"); path != "" {
		readmeScreenshot(t, p, api, auth, path)
	}
}

// TestConsoleFollowsResize opens the console on 1000 partitions, resizes
// the directory under it, and checks that the console then places the
// profile, sums the partitions and draws the heatmap with the new count:
// every partition in some cell, each counted once, and the profile's cell
// marked, up to MaxPartitions.
func TestConsoleFollowsResize(t *testing.T) {
	exe := chromiumPath(t)
	srv, _ := newStartedServer(t, nil)
	api := srv.URL + base

	// 400 profiles, one of them in partition-1010 of 4000, which is
	// partition-010 of 1000.
	target := ""
	for i := 0; target == ""; i++ {
		if e := fmt.Sprintf("ada%d@example.com", i); partmap.PartitionOf(e, 4000) == 1010 {
			target = e
		}
	}
	var bulk strings.Builder
	fmt.Fprintf(&bulk, `{"emailAddress":%q}`+"\n", target)
	for i := range 399 {
		fmt.Fprintf(&bulk, `{"emailAddress":"seed%03d@example.com"}`+"\n", i)
	}
	if r := send(t, "POST", api+"/customer-profiles/bulk", strings.NewReader(bulk.String())); r.status != 200 || !strings.Contains(string(r.body), `"created":400,`) {
		t.Fatalf("seeding: %d %s", r.status, r.body)
	}

	p := openPage(t, exe, 90*time.Second)
	p.do("load the console", chromedp.Navigate(srv.URL+"/"))
	p.until("the heatmap is drawn", q("#heatmap")+".dataset.loaded")
	find := func() {
		p.t.Helper()
		p.do("find the profile", emptyField("#find-email"), chromedp.SendKeys(chromedp.CSS("#find-email"), target),
			chromedp.Click(chromedp.CSS(`#find-form button[type="submit"]`)))
	}
	find()
	p.waitText("#view-partition", "partition-010")

	// Resized while the console is open: finding the profile again finds
	// the new count too.
	resize(t, api, 4000)
	find()
	p.waitText("#view-partition", "partition-1010")
	checkHeatmap(t, p, api, target, 4000)
	rows := `[...document.querySelectorAll('#browse-rows tr[data-email]')].map(tr => [tr.dataset.email, tr.querySelector('td.partition').textContent])`
	for _, row := range evaluate[[][2]string](p, rows) {
		if want := partmap.PartitionOf(row[0], 4000).String(); row[1] != want {
			t.Errorf("the browse table places %s in %s, want %s", row[0], row[1], want)
		}
	}

	// The largest count still makes a heatmap of a readable size, found
	// by Refresh alone.
	resize(t, api, partmap.MaxPartitions)
	p.do("refresh the heatmap", chromedp.Click(chromedp.CSS("#heatmap-refresh")))
	p.waitText("#view-partition", partmap.PartitionOf(target, partmap.MaxPartitions).String())
	checkHeatmap(t, p, api, target, partmap.MaxPartitions)
	p.do("click the profile's cell", chromedp.Click(chromedp.CSS("#heatmap .cell.current")))
	c := evaluate[struct{ First, Last, Profiles int }](p, `(c => ({first: Number(c.dataset.first), last: Number(c.dataset.last),
		profiles: Number(c.dataset.profiles)}))(`+q("#heatmap .cell.current")+`)`)
	want := fmt.Sprintf("%s to %s: %d profiles", partmap.Partition(c.First), partmap.Partition(c.Last), c.Profiles)
	if c.Profiles == 1 {
		want = strings.TrimSuffix(want, "s")
	}
	p.waitText("#heatmap-detail", want)
	p.screenshot("resized.png")
	p.checkConsole()
}

// resize resizes the directory to n partitions and waits until it is done.
func resize(t *testing.T, api string, n int) {
	t.Helper()
	if r := send(t, "POST", fmt.Sprintf("%s/resize?partitions=%d", api, n), nil); r.status != 202 {
		t.Fatalf("resize to %d: %d %s", n, r.status, r.body)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var st pmhttp.ResizeJSON
		r := send(t, "GET", api+"/resize", nil)
		if r.status != 200 || json.Unmarshal(r.body, &st) != nil {
			t.Fatalf("resize status: %d %s", r.status, r.body)
		}
		if st.State == "idle" && st.Partitions == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the resize to %d has not finished: %s", n, r.body)
		}
	}
}

// checkHeatmap waits for the console's summary to count n partitions, then
// checks that the heatmap's cells cover them all in order, each counting
// what the server counts in its partitions, that there are few enough cells
// to read, and that the profile's cell is the one marked.
func checkHeatmap(t *testing.T, p *page, api, email string, n int) {
	t.Helper()
	var stats struct {
		Partitions []struct {
			Name     string
			Profiles int
		}
		PartitionsInUse int
		TotalProfiles   int
	}
	if r := send(t, "GET", api+"/partitions", nil); r.status != 200 || json.Unmarshal(r.body, &stats) != nil {
		t.Fatalf("GET /partitions: %d %s", r.status, r.body)
	}
	summary := fmt.Sprintf("%d profiles in %d of %s partitions", stats.TotalProfiles, stats.PartitionsInUse, thousands(n))
	p.until("the summary says "+summary, q("#heatmap-summary")+".textContent.includes("+jsString(summary)+")")
	counts := map[string]int{}
	for _, c := range stats.Partitions {
		counts[c.Name] = c.Profiles
	}
	type cell struct {
		First, Last, Profiles int
		Current               bool
	}
	cells := evaluate[[]cell](p, `[...document.querySelectorAll('#heatmap .cell')].map(c => ({
		first: Number(c.dataset.first), last: Number(c.dataset.last), profiles: Number(c.dataset.profiles),
		current: c.classList.contains('current')}))`)
	if len(cells) == 0 || len(cells) > partmap.DefaultPartitions {
		t.Fatalf("%d partitions are drawn in %d cells; want 1 to %d", n, len(cells), partmap.DefaultPartitions)
	}
	at := partmap.PartitionOf(email, n)
	next, marked := 0, 0
	for i, c := range cells {
		if c.First != next || c.Last < c.First {
			t.Fatalf("cell %d covers %d to %d; the one before ended at %d", i, c.First, c.Last, next-1)
		}
		want := 0
		for part := c.First; part <= c.Last; part++ {
			want += counts[partmap.Partition(part).String()]
		}
		if c.Profiles != want {
			t.Errorf("cell %d (%d to %d) counts %d profiles; the server, %d", i, c.First, c.Last, c.Profiles, want)
		}
		if c.Current {
			marked++
			if int(at) < c.First || int(at) > c.Last {
				t.Errorf("cell %d (%d to %d) is marked as %s's, which is in %s", i, c.First, c.Last, email, at)
			}
		}
		next = c.Last + 1
	}
	if next != n {
		t.Errorf("the cells end at %d, want %d", next-1, n-1)
	}
	if marked != 1 {
		t.Errorf("%d cells are marked as the profile's, want 1", marked)
	}
}

// thousands writes n as the console does, with commas.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// TestConsoleKeepsEmptyFields edits a profile with empty fields: saving
// keeps every field that is present, empty or not, and only the remove
// buttons delete one.
func TestConsoleKeepsEmptyFields(t *testing.T) {
	exe := chromiumPath(t)
	srv, _ := newStartedServer(t, nil)
	api := srv.URL + base
	const email = "grace@example.com"
	stored := func() map[string]string {
		t.Helper()
		var profile map[string]string
		r := send(t, "GET", api+"/customer-profile?emailAddress="+email, nil)
		if r.status != 200 || json.Unmarshal(r.body, &profile) != nil {
			t.Fatalf("GET the profile: %d %s", r.status, r.body)
		}
		return profile
	}
	profile := `{"emailAddress":"grace@example.com","fullName":"","companyName":"Remington Rand","notes":"","visits":"42"}`
	if r := send(t, "PUT", api+"/customer-profile", strings.NewReader(profile)); r.status != 201 {
		t.Fatalf("PUT: %d %s", r.status, r.body)
	}

	p := openPage(t, exe, 60*time.Second)
	p.do("load the console", chromedp.Navigate(srv.URL+"/"))
	p.until("the heatmap is drawn", q("#heatmap")+".dataset.loaded")
	p.do("find the profile", chromedp.SendKeys(chromedp.CSS("#find-email"), email),
		chromedp.Click(chromedp.CSS(`#find-form button[type="submit"]`)))
	p.waitText(`#view-fields dd[data-field="companyName"]`, "Remington Rand")
	p.waitText(`#view-fields dd[data-field="fullName"]`, "")
	p.waitText(`#view-fields dd[data-field="notes"]`, "")

	// An edit of one field leaves the empty ones, and adds an empty one.
	p.do("edit the company and add an empty field",
		chromedp.Click(chromedp.CSS("#edit-button")),
		emptyField("#edit-companyName"),
		chromedp.SendKeys(chromedp.CSS("#edit-companyName"), "UNIVAC"),
		chromedp.Click(chromedp.CSS("#add-field")),
		chromedp.SendKeys(chromedp.CSS("#extra-fields .field-row:last-child .field-name"), "nickname"),
		chromedp.Click(chromedp.CSS("#add-field")), // a row left blank is no field
		chromedp.Click(chromedp.CSS("#save-button")))
	p.waitNotice("ok", "", "Saved "+email)
	want := map[string]string{"emailAddress": email, "fullName": "", "companyName": "UNIVAC", "notes": "", "visits": "42", "nickname": ""}
	if got := stored(); !maps.Equal(got, want) {
		t.Fatalf("after the edit the server has %v, want %v", got, want)
	}
	p.waitText(`#view-fields dd[data-field="nickname"]`, "")

	// Emptying a box empties the field; removing it is its own act, for a
	// documented field and for another.
	p.do("empty the company, remove fullName and visits",
		chromedp.Click(chromedp.CSS("#notice-close")), // so that the next "Saved" is the next save's
		chromedp.Click(chromedp.CSS("#edit-button")),
		emptyField("#edit-companyName"),
		chromedp.Click(chromedp.CSS("#remove-fullName")),
		chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll('#extra-fields .field-row')]
			.find(r => r.querySelector('.field-name').value === 'visits').querySelector('button').click()`),
		chromedp.Click(chromedp.CSS("#save-button")))
	p.waitNotice("ok", "", "Saved "+email)
	want = map[string]string{"emailAddress": email, "companyName": "", "notes": "", "nickname": ""}
	if got := stored(); !maps.Equal(got, want) {
		t.Fatalf("after emptying one field and removing two the server has %v, want %v", got, want)
	}
	p.until("the view lacks the removed fields", `document.querySelector('#view-fields dd[data-field="fullName"]') === null && `+
		`document.querySelector('#view-fields dd[data-field="visits"]') === null && `+
		`document.querySelector('#view-fields dd[data-field="notes"]') !== null`)
	p.checkConsole()
}

// readmeScreenshot fills the directory with made-up customers and saves the
// console, at 1280x900, with one of them open.
func readmeScreenshot(t *testing.T, p *page, api string, auth []string, path string) {
	first := []string{"ada", "grace", "alan", "edsger", "barbara", "donald", "margaret", "ken", "frances", "john", "radia", "niklaus", "shafi", "leslie", "hedy", "dennis"}
	last := []string{"lovelace", "hopper", "turing", "dijkstra", "liskov", "knuth", "hamilton", "thompson", "allen", "backus", "perlman", "wirth", "goldwasser", "lamport", "lamarr", "ritchie"}
	companies := []string{"Acme", "Initech", "Globex", "Umbrella", "Hooli", "Vandelay Industries", "Soylent", "Stark Industries"}
	tiers := []string{"bronze", "silver", "gold", "platinum"}
	rng := rand.New(rand.NewPCG(7, 1843))
	var bulk strings.Builder
	enc := json.NewEncoder(&bulk)
	for i := range 2400 {
		f, l := first[rng.IntN(len(first))], last[rng.IntN(len(last))]
		enc.Encode(map[string]string{
			"emailAddress": fmt.Sprintf("%s.%s%d@example.com", f, l, i),
			"fullName":     strings.ToUpper(f[:1]) + f[1:] + " " + strings.ToUpper(l[:1]) + l[1:],
			"companyName":  companies[rng.IntN(len(companies))],
			"customerTier": tiers[rng.IntN(len(tiers))],
			"visits":       fmt.Sprint(rng.IntN(200)),
		})
	}
	if r := send(t, "POST", api+"/customer-profiles/bulk", strings.NewReader(bulk.String()), auth...); r.status != 200 {
		t.Fatalf("loading sample profiles: %d %s", r.status, r.body)
	}
	const email = "grace.hopper@example.com"
	p.do("open a sample profile",
		chromedp.EmulateViewport(1280, 900),
		chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`),
		chromedp.Click(chromedp.CSS("#new-button")),
		fillNewProfile(email, "Grace Hopper", "Remington Rand", "platinum", "visits", "42"))
	p.waitNotice("ok", "", "Created "+email)
	p.do("find the new profile", emptyField("#find-email"), chromedp.SendKeys(chromedp.CSS("#find-email"), email),
		chromedp.Click(chromedp.CSS(`#find-form button[type="submit"]`)))
	var stats struct{ TotalProfiles int }
	if r := send(t, "GET", api+"/partitions", nil, auth...); r.status != 200 || json.Unmarshal(r.body, &stats) != nil {
		t.Fatalf("GET /partitions: %d %s", r.status, r.body)
	}
	p.until("the heatmap counts every profile", fmt.Sprintf(
		"[...document.querySelectorAll('#heatmap .cell')].reduce((n, c) => n + Number(c.dataset.profiles), 0) === %d", stats.TotalProfiles))
	_, part, err := partmap.Locate(email, partmap.DefaultPartitions)
	if err != nil {
		t.Fatal(err)
	}
	p.do("point at its partition", chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-partition=%q]`, part))))
	p.do("browse ten at a time", chromedp.Evaluate[chromedp.Void](
		"(s => { s.value = '10'; s.dispatchEvent(new Event('change')) })("+q("#page-size")+")"))
	p.until("a page of ten", `document.querySelectorAll('#browse-rows tr[data-email]').length === 10`)
	png := run(p, "take the screenshot", chromedp.CaptureScreenshot())
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	if len(png) > 250<<10 {
		t.Errorf("%s is %d KB; keep it under 250 KB", path, len(png)>>10)
	}
	t.Logf("wrote %s (%d KB)", path, len(png)>>10)
}

// page is one tab of a headless Chromium.
type page struct {
	t   *testing.T
	ctx context.Context

	mu       sync.Mutex
	problems []string // errors the page logged
}

// stepTimeout bounds each action and wait, well inside the test's
// deadline, so that a failure still has a browser to take a screenshot.
const stepTimeout = 15 * time.Second

// openPage starts Chromium for the test; it and everything in it stop at
// the deadline. The page's uncaught exceptions and logged errors are
// collected for checkConsole, and a failed test leaves a screenshot.
func openPage(t *testing.T, exe string, deadline time.Duration) *page {
	// Chromium's profile and its shared-memory files (which
	// disable-dev-shm-usage puts in TMPDIR) go where the test removes them.
	dir := t.TempDir()
	base, cancelBase := context.WithTimeout(context.Background(), deadline)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox, // as root, Chromium refuses to start with its sandbox
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(filepath.Join(dir, "profile")),
		chromedp.Env("TMPDIR="+dir),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(base, opts...)
	tab, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(tab, 5*time.Second)
		defer cancel()
		chromedp.Cancel(ctx) // closes the browser and waits for it
		cancelTab()
		cancelAlloc()
		cancelBase()
	})
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	p := &page{t: t, ctx: tab}
	messages := chromedp.Console(tab)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			// A refused request is logged by the network as an error, and
			// the test makes some on purpose; anything else is a fault.
			if m.IsException() || (m.Type == chromedp.ConsoleError && m.Source != "network") {
				p.mu.Lock()
				p.problems = append(p.problems, m.String())
				p.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		if t.Failed() {
			p.screenshot("failure.png")
		}
	})
	return p
}

func run[T any](p *page, what string, a chromedp.Action[T]) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		p.fatalf("%s: %v", what, err)
	}
	return v
}

// fillNewProfile fills the open new-profile form with a profile and one
// more field, and saves it.
func fillNewProfile(email, name, company, tier, field, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.SendKeys(chromedp.CSS("#edit-emailAddress"), email),
		chromedp.SendKeys(chromedp.CSS("#edit-fullName"), name),
		chromedp.SendKeys(chromedp.CSS("#edit-companyName"), company),
		chromedp.SendKeys(chromedp.CSS("#edit-customerTier"), tier),
		chromedp.Click(chromedp.CSS("#add-field")),
		chromedp.SendKeys(chromedp.CSS("#extra-fields .field-row:last-child .field-name"), field),
		chromedp.SendKeys(chromedp.CSS("#extra-fields .field-row:last-child .field-value"), value),
		chromedp.Click(chromedp.CSS("#save-button")))
}

func (p *page) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	run(p, what, chromedp.Steps(steps...))
}

func evaluate[T any](p *page, expr string) T {
	p.t.Helper()
	return run(p, "evaluate "+expr, chromedp.Evaluate[T](expr))
}

// until waits for a JavaScript condition on the page.
func (p *page) until(what, cond string) {
	p.t.Helper()
	p.do("wait until "+what, chromedp.Poll[chromedp.Void](cond,
		chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(0)))
}

func (p *page) waitText(sel, want string) {
	p.t.Helper()
	p.until(fmt.Sprintf("%s reads %q", sel, want), fmt.Sprintf("(e => e !== null && !e.closest('[hidden]') && e.textContent === %s)(%s)", jsString(want), q(sel)))
}

// waitNotice waits for the message line to be of a kind, for a problem
// code (or none), and to contain some text.
func (p *page) waitNotice(kind, code, text string) {
	p.t.Helper()
	p.until(fmt.Sprintf("the notice is %s %q %q", kind, code, text),
		fmt.Sprintf("(n => !n.hidden && n.dataset.kind === %s && n.dataset.problem === %s && n.textContent.includes(%s))(%s)",
			jsString(kind), jsString(code), jsString(text), q("#notice")))
}

// fatalf fails the test with what the console was saying at the time.
func (p *page) fatalf(format string, args ...any) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 2*time.Second)
	defer cancel()
	notice, err := chromedp.Run(ctx, chromedp.Evaluate[string](q("#notice")+`.hidden ? "(none)" : `+q("#notice-text")+".textContent"))
	if err != nil {
		notice = "(unreadable: " + err.Error() + ")"
	}
	p.t.Fatalf(format+"\nthe console's notice: %s", append(args, notice)...)
}

// screenshot saves the whole page as a test artifact; `make test` keeps
// them under artifacts/.
func (p *page) screenshot(name string) {
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Logf("no screenshot: %v", err)
		return
	}
	file := filepath.Join(p.t.ArtifactDir(), name)
	if err := os.WriteFile(file, png, 0o644); err != nil {
		p.t.Error(err)
	}
	p.t.Logf("screenshot: %s", file)
}

func (p *page) checkConsole() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.problems {
		p.t.Errorf("the page logged: %s", m)
	}
}

// emptyField empties a text field, as selecting its text and deleting it would.
func emptyField(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](q(sel) + ".value = ''")
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func q(sel string) string { return "document.querySelector(" + jsString(sel) + ")" }

// The console shows when a profile and its fields expire, counting down,
// and reads the profile again when a countdown runs out: the field is gone.
func TestConsoleShowsDeadlines(t *testing.T) {
	exe := chromiumPath(t)
	srv, _ := newStartedServer(t, nil)
	api := srv.URL + base
	const email = "hedy@example.com"
	profile := `{"emailAddress":"hedy@example.com","fullName":"Hedy Lamarr","visits":"3","code":"1234"}`
	if r := send(t, "PUT", api+"/customer-profile", strings.NewReader(profile)); r.status != 201 {
		t.Fatalf("PUT: %d %s", r.status, r.body)
	}
	for _, query := range []string{"&fields=visits&seconds=300", "&seconds=7200", "&fields=code&seconds=3"} {
		if r := send(t, "POST", api+"/customer-profile/expire?emailAddress="+email+query, nil); r.status != 200 {
			t.Fatalf("expire %s: %d %s", query, r.status, r.body)
		}
	}

	p := openPage(t, exe, 60*time.Second)
	p.do("load the console", chromedp.Navigate(srv.URL+"/"))
	p.until("the heatmap is drawn", q("#heatmap")+".dataset.loaded")
	p.do("find the profile", chromedp.SendKeys(chromedp.CSS("#find-email"), email),
		chromedp.Click(chromedp.CSS(`#find-form button[type="submit"]`)))
	p.until("the field's countdown shows", `(document.querySelector('#view-fields dd[data-field="visits"] .ttl') || {}).textContent?.match(/^in [45]m/) != null`)
	p.until("the profile's countdown shows", `!document.querySelector('#view-ttl').hidden && /^in (2h|1h 59m)/.test(document.querySelector('#view-ttl .ttl').textContent)`)
	p.until("a field without a deadline has no countdown", `document.querySelector('#view-fields dd[data-field="fullName"] .ttl') === null`)
	p.until("the field whose countdown ran out is gone", `document.querySelector('#view-fields dd[data-field="code"]') === null && `+
		`document.querySelector('#view-fields dd[data-field="visits"]') !== null`)
	p.checkConsole()
}

// A field that expires between the console's read of the profile and its
// read of the deadlines has no countdown to run out: the console reads the
// profile again, so that the field does not stay on the page. The server
// holds the deadlines' read until the field has expired.
func TestConsoleExpiredMidRead(t *testing.T) {
	exe := chromiumPath(t)
	store := newStore(t, nil)
	api := pmhttp.NewServer(store, nil)
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/customer-profile/ttl") {
			once.Do(func() { close(held); <-release })
		}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	b := srv.URL + base
	if r := send(t, "POST", b+"/start", nil); r.status != 200 {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	const email = "ada@example.com"
	if r := send(t, "PUT", b+"/customer-profile", strings.NewReader(`{"emailAddress":"ada@example.com","fullName":"Ada","code":"1234"}`)); r.status != 201 {
		t.Fatalf("PUT: %d %s", r.status, r.body)
	}
	p := openPage(t, exe, 60*time.Second)
	p.do("load the console", chromedp.Navigate(srv.URL+"/"))
	p.do("find the profile", chromedp.SendKeys(chromedp.CSS("#find-email"), email),
		chromedp.Click(chromedp.CSS(`#find-form button[type="submit"]`)))
	select {
	case <-held:
	case <-time.After(stepTimeout):
		t.Fatal("the console did not read the deadlines")
	}
	p.until("the field is shown", `document.querySelector('#view-fields dd[data-field="code"]') !== null`)
	if r := send(t, "POST", b+"/customer-profile/expire?emailAddress="+email+"&fields=code&milliseconds=0", nil); r.status != 200 {
		t.Fatalf("expire: %d %s", r.status, r.body)
	}
	close(release)
	p.until("the expired field is gone", `document.querySelector('#view-fields dd[data-field="code"]') === null && `+
		`document.querySelector('#view-fields dd[data-field="fullName"]') !== null`)
	p.checkConsole()
}

// TestConsoleSearch searches as a support desk would, in headless
// Chromium, against a real server over Pebble: an index is created, "ali"
// typed into the box finds Alice Liddell among the 32 profiles whose
// names begin so, two pages by the cursor hold each of them once, with
// the total on both, a hit opens its profile, a bad query says where it
// went wrong, and an index still building says so.
func TestConsoleSearch(t *testing.T) {
	exe := chromiumPath(t)
	store := newStore(t, failFast())
	srv := serveStore(t, store, &pmhttp.ServerOptions{Logger: newTextLogger(io.Discard)})
	start(t, srv.URL)
	api := srv.URL + base

	var bulk strings.Builder
	matching := []string{"alice@example.com"}
	bulk.WriteString(`{"emailAddress":"alice@example.com","fullName":"Alice Liddell","companyName":"Wonderland","customerTier":"gold","visits":"12"}` + "\n")
	for i := range 31 {
		e := fmt.Sprintf("alison%02d@example.com", i)
		matching = append(matching, e)
		fmt.Fprintf(&bulk, `{"emailAddress":%q,"fullName":"Alison %d","customerTier":"silver"}`+"\n", e, i)
	}
	for i := range 10 {
		fmt.Fprintf(&bulk, `{"emailAddress":"bob%d@example.com","fullName":"Bob Carroll","customerTier":"gold"}`+"\n", i)
	}
	if r := send(t, "POST", api+"/customer-profiles/bulk", strings.NewReader(bulk.String())); r.status != 200 || !strings.Contains(string(r.body), `"created":42,`) {
		t.Fatalf("seeding: %d %s", r.status, r.body)
	}
	createIndex(t, srv.URL, `{"name":"desk","fields":[{"name":"fullName","type":"TEXT"},{"name":"customerTier","type":"TAG"},{"name":"visits","type":"NUMERIC","sortable":true}]}`)
	waitSearchable(t, srv.URL, "desk")

	p := openPage(t, exe, 90*time.Second)
	p.do("load the console", chromedp.Navigate(srv.URL+"/"))
	p.until("the indexes are listed", q("#search-panel")+".dataset.indexes")
	if got := evaluate[string](p, q("#search-index")+".value"); got != "desk" {
		t.Fatalf("the index picked is %q, want desk (the directory's own, profiles, holds no words)", got)
	}
	if got := evaluate[[]string](p, `[...document.querySelectorAll('#search-index option')].map(o => o.value)`); !slices.Equal(got, []string{"profiles", "desk"}) {
		t.Errorf("the index picker offers %q", got)
	}
	p.waitText("#search-index-info", "fullName TEXT · customerTier TAG · visits NUMERIC sortable — 42 profiles indexed.")

	// Typing searches: "ali" is sent as ali*, and finds Alice Liddell.
	hits := `[...document.querySelectorAll('#search-rows tr[data-email]')].map(tr => tr.dataset.email)`
	p.do("type ali", chromedp.SendKeys(chromedp.CSS("#search-query"), "ali"))
	p.until("page 1 of the hits", q("#search-table")+".dataset.page === '1' && "+q("#search-table")+".dataset.total === '32' && "+hits+".length === 25")
	p.waitText("#search-summary", "32 profiles match ali*")
	p.until("Alice Liddell is a hit", `[...document.querySelectorAll('#search-rows tr')].some(tr => tr.dataset.email === 'alice@example.com' && tr.cells[1].textContent === 'Alice Liddell' && tr.cells[3].textContent === 'gold')`)
	listed := evaluate[[]string](p, hits)
	p.do("go to the next page", chromedp.Click(chromedp.CSS("#search-next")))
	p.until("page 2 of the hits", q("#search-table")+".dataset.page === '2' && "+hits+".length === 7 && "+q("#search-next")+".disabled")
	p.waitText("#search-summary", "32 profiles match ali*")
	p.waitText("#search-page", "Page 2 · 26–32")
	listed = append(listed, evaluate[[]string](p, hits)...)
	slices.Sort(listed)
	slices.Sort(matching)
	if !slices.Equal(listed, matching) {
		t.Errorf("two pages listed %v, want %v", listed, matching)
	}
	p.do("go back", chromedp.Click(chromedp.CSS("#search-prev")))
	p.until("page 1 again", q("#search-table")+".dataset.page === '1' && "+hits+".length === 25 && "+q("#search-prev")+".disabled")

	// A hit opens its profile.
	p.do("open Alice", chromedp.Click(chromedp.CSS(`#search-rows tr[data-email="alice@example.com"] button.link`)))
	p.waitText("#view-email", "alice@example.com")
	p.waitText(`#view-fields dd[data-field="companyName"]`, "Wonderland")

	// The query syntax goes as typed.
	p.do("search by tag and words",
		emptyField("#search-query"),
		chromedp.SendKeys(chromedp.CSS("#search-query"), "@customerTier:{gold} -carroll"),
		chromedp.Click(chromedp.CSS("#search-button")))
	p.until("one hit", q("#search-table")+".dataset.query === '@customerTier:{gold} -carroll' && "+q("#search-table")+".dataset.total === '1'")
	if got := evaluate[[]string](p, hits); !slices.Equal(got, []string{"alice@example.com"}) {
		t.Errorf("@customerTier:{gold} -carroll found %v", got)
	}

	// A bad query: the server's words, and a mark under where it went wrong.
	for _, tc := range []struct{ query, text, where string }{
		{"@fullName:(ali | bob", "The query was refused: Syntax error at offset 20 near end of query: the ( at offset 10 is not closed",
			"@fullName:(ali | bob\n                    ^"},
		{"ali @city:{Oslo}", "The query was refused: Unknown field at offset 4 near city", "ali @city:{Oslo}\n    ^"},
	} {
		p.do("search for "+tc.query,
			emptyField("#search-query"),
			chromedp.SendKeys(chromedp.CSS("#search-query"), tc.query),
			chromedp.Click(chromedp.CSS("#search-button")))
		p.waitText("#search-error-text", tc.text)
		p.waitText("#search-error-where", tc.where)
		if evaluate[string](p, q("#search-error")+".dataset.problem") != "invalid" || !evaluate[bool](p, q("#search-table")+".hidden") {
			t.Errorf("%s: the error is not an invalid one, or the old hits still show", tc.query)
		}
	}

	// An index created while the console is open, whose build is held
	// back by a writer's lock on one partition: the console says it is
	// building, and searches it once it is built.
	release := holdPartition(t, store, "bob3@example.com")
	createIndex(t, srv.URL, `{"name":"late","fields":[{"name":"fullName","type":"TEXT"}]}`)
	p.do("reload the indexes", chromedp.Click(chromedp.CSS("#search-reload")))
	p.until("late is offered", `[...document.querySelectorAll('#search-index option')].some(o => o.value === 'late' && o.textContent === 'late (building)')`)
	p.do("search late for carroll",
		chromedp.SetValue(chromedp.CSS("#search-index"), "late"),
		emptyField("#search-query"),
		chromedp.SendKeys(chromedp.CSS("#search-query"), "carroll"),
		chromedp.Click(chromedp.CSS("#search-button")))
	p.until("the console says late is building", q("#search-error")+`.dataset.kind === 'building' && `+q("#search-error-text")+`.textContent.includes('still being built')`)
	release()
	waitSearchable(t, srv.URL, "late")
	p.do("search late again", chromedp.Click(chromedp.CSS("#search-button")))
	p.until("ten hits", q("#search-table")+".dataset.total === '10' && "+q("#search-error")+".hidden")
	p.waitText("#search-index-info", "fullName TEXT — 42 profiles indexed.")
	p.until("late is offered as built", `[...document.querySelectorAll('#search-index option')].some(o => o.value === 'late' && o.textContent === 'late')`)
	p.screenshot("search.png")
	p.checkConsole()
}
