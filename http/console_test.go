package http_test

import (
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	pmhttp "github.com/partmap/partmap/http"
	"github.com/partmap/partmap/pebble"
)

// The console's files are open, typed, revalidated and locked down by a
// policy that forbids inline script; the rest of the server is unchanged.
func TestConsoleFiles(t *testing.T) {
	_, line, err := pmhttp.NewToken("ops", pmhttp.ScopeAdmin)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := pmhttp.ParseTokens(strings.NewReader(line + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := pebble.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	srv := httptest.NewServer(pmhttp.NewServer(store, &pmhttp.ServerOptions{Tokens: tokens}))
	defer srv.Close()

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
