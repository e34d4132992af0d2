package http_test

import (
	"strings"
	"testing"

	"github.com/partmap/partmap/auth"
	pmhttp "github.com/partmap/partmap/http"
)

func TestHealthAndMetrics(t *testing.T) {
	srv, store := newServer(t, failFast())
	u := srv.URL
	for _, path := range []string{"/healthz", "/readyz"} {
		if r := send(t, "GET", u+path, nil); r.status != 200 {
			t.Fatalf("%s before start: %d %s", path, r.status, r.body)
		}
	}
	start(t, u)
	send(t, "PUT", u+base+"/customer-profile", strings.NewReader(`{"emailAddress":"m@example.com"}`))
	send(t, "GET", u+base+"/customer-profile?emailAddress=nobody@example.com", nil)
	release := holdPartition(t, store, "m@example.com")
	send(t, "PUT", u+base+"/customer-profile", strings.NewReader(`{"emailAddress":"m@example.com"}`))
	release()

	r := send(t, "GET", u+"/metrics", nil)
	if r.status != 200 {
		t.Fatalf("/metrics: %d", r.status)
	}
	for _, want := range []string{
		`partmap_http_requests_total{route="PUT /patterns/hash-partitioned-attribute-map/customer-profile",status="201"} 1`,
		`partmap_http_requests_total{route="PUT /patterns/hash-partitioned-attribute-map/customer-profile",status="409"} 1`,
		`partmap_http_requests_total{route="GET /patterns/hash-partitioned-attribute-map/customer-profile",status="404"} 1`,
		`partmap_http_request_duration_seconds_count{route="POST /patterns/hash-partitioned-attribute-map/start"} 1`,
		"partmap_lock_conflicts_total 1",
		"partmap_http_requests_in_flight 1", // the scrape itself
		"partmap_profiles 1",
		"partmap_partitions_in_use 1",
		`partmap_store_commit_seconds_count{outcome="ok"} 1`,
		`partmap_store_lock_wait_seconds_count{outcome="ok"} 2`, // the PUT and holdPartition
		`partmap_store_lock_wait_seconds_count{outcome="conflict"} 1`,
	} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// With tokens, metrics need the read scope and pprof the admin scope; the
// health checks stay open for load balancers.
func TestOpsRoutesHonourTokens(t *testing.T) {
	byScope, tokens := newTokens(t, auth.ScopeRead, auth.ScopeAdmin)
	readTok, adminTok := byScope[auth.ScopeRead], byScope[auth.ScopeAdmin]
	store := newStore(t, nil)
	srv := serveStore(t, store, &pmhttp.ServerOptions{Tokens: tokens})
	for _, tc := range []struct {
		path   string
		header []string
		status int
	}{
		{"/healthz", nil, 200},
		{"/readyz", nil, 200},
		{"/metrics", nil, 401},
		{"/metrics", bearer(readTok), 200},
		{"/debug/pprof/", bearer(readTok), 403},
		{"/debug/pprof/", bearer(adminTok), 200},
		{"/debug/pprof/cmdline", nil, 401},
	} {
		if r := send(t, "GET", srv.URL+tc.path, nil, tc.header...); r.status != tc.status {
			t.Errorf("GET %s: %d, want %d", tc.path, r.status, tc.status)
		}
	}
}
