package main

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
)

func TestSearchAndCheckCommands(t *testing.T) {
	srv := startedServer(t)
	for _, p := range [][]string{
		{"a@example.com", "Acme Corp", "gold"},
		{"b@example.com", "Acme Corp", "silver"},
		{"c@example.com", "Initech", "gold"},
	} {
		if code, _, errOut := run(t, "", "put", p[0], "--company", p[1], "--tier", p[2], srv); code != 0 {
			t.Fatalf("put %s: %s", p[0], errOut)
		}
	}
	code, out, errOut := run(t, "", "search", "companyName=Acme Corp", "customerTier=gold", srv)
	if code != 0 || !strings.Contains(out, "a@example.com\t") || strings.Contains(out, "b@example.com") || !strings.Contains(errOut, "1 profile\n") {
		t.Fatalf("search: %d %q %q", code, out, errOut)
	}
	if code, out, _ := run(t, "", "list", "--json", "customerTier=gold", srv); code != 0 || strings.Count(out, "\n") != 2 {
		t.Fatalf("list with a condition: %d %q", code, out)
	}
	for _, bad := range [][]string{{"search"}, {"search", "=x"}, {"search", "companyName"}} {
		if code, _, _ := run(t, "", append(bad, srv)...); code != 2 {
			t.Errorf("%v: exit %d, want 2", bad, code)
		}
	}
	// A refused search prints nothing to stdout: no table header, no rows.
	for _, args := range [][]string{{"search", "fullName=x"}, {"list", "fullName=x"}, {"list", "--json", "fullName=x"}, {"search", "customerTier=gold", "fullName=x"}} {
		if code, out, errOut := run(t, "", append(args, srv)...); code != 1 || out != "" || !strings.Contains(errOut, "not indexed") || !strings.Contains(errOut, "companyName, customerTier") {
			t.Errorf("%q by a field that is not indexed: %d %q %q", args, code, out, errOut)
		}
	}

	if code, out, _ := run(t, "", "check", srv); code != 0 || !strings.Contains(out, "checked 1000 partitions") || !strings.Contains(out, "companyName, customerTier") {
		t.Fatalf("check: %d %q", code, out)
	}
	if code, out, _ := run(t, "", "check", "--partition", "5", srv); code != 0 || !strings.Contains(out, "checked 1 partition:") {
		t.Fatalf("check one partition: %d %q", code, out)
	}
	for _, bad := range []string{"1000", "-2"} {
		if code, _, _ := run(t, "", "check", "--partition", bad, srv); code != 2 {
			t.Errorf("check --partition %s: exit %d, want 2", bad, code)
		}
	}
}

func TestServeIndexFlag(t *testing.T) {
	for _, bad := range []string{"emailAddress", "a,a", ",x"} {
		if code, _, errOut := run(t, "", "serve", "--index", bad); code != 2 || !strings.Contains(errOut, "--index") {
			t.Errorf("--index %q: %d %q", bad, code, errOut)
		}
	}
	url, _ := serveInProcess(t, "--index", "city")
	srv := "--server=" + url
	run(t, "", "start", srv)
	run(t, "", "put", "x@example.com", "--field", "city=Oslo", srv)
	if code, out, errOut := run(t, "", "search", "city=Oslo", srv); code != 0 || !strings.Contains(out, "x@example.com") {
		t.Fatalf("search by a chosen index: %d %q %q", code, out, errOut)
	}
}

func TestMapLockCommands(t *testing.T) {
	srv := startedServer(t)
	code, lease, errOut := run(t, "", "map-lock", "--for", "30s", srv)
	lease = strings.TrimSpace(lease)
	if code != 0 || len(lease) != 32 || !strings.Contains(errOut, "map-unlock "+lease) {
		t.Fatalf("map-lock: %d %q %q", code, lease, errOut)
	}
	if code, _, errOut := run(t, "", "map-lock", srv); code != 1 || !strings.Contains(errOut, "already held") {
		t.Fatalf("a second map-lock: %d %q", code, errOut)
	}
	// A write under a lock that outlasts the client's retries says what
	// holds it and until when, at once instead of retrying in silence.
	start := time.Now()
	if code, _, errOut := run(t, "", "put", "w@example.com", "--name", "W", srv); code != 1 || !strings.Contains(errOut, "whole map is locked") || !strings.Contains(errOut, "until") {
		t.Fatalf("a put under the whole-map lock: %d %q", code, errOut)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("a put under a whole-map lock of 30 s gave up after %v", waited)
	}
	if code, _, _ := run(t, "", "map-unlock", lease, srv); code != 0 {
		t.Fatalf("map-unlock: %d", code)
	}
	// A lock that ends within the client's retries is waited out, and the
	// client says what it waits for.
	if code, _, errOut := run(t, "", "map-lock", "--for", "2s", srv); code != 0 {
		t.Fatalf("map-lock --for 2s: %d %q", code, errOut)
	}
	if code, _, errOut := run(t, "", "put", "w@example.com", "--name", "W", srv); code != 0 || !strings.Contains(errOut, "waiting") || !strings.Contains(errOut, "whole map is locked") {
		t.Fatalf("a put under a short whole-map lock: %d %q", code, errOut)
	}
	if code, _, errOut := run(t, "", "map-unlock", lease, srv); code != 1 || !strings.Contains(errOut, "no whole-map lock") {
		t.Fatalf("a second map-unlock: %d %q", code, errOut)
	}
	if code, _, errOut := run(t, "", "map-unlock", "", srv); code != 2 || !strings.Contains(errOut, "needs the LEASE") {
		t.Fatalf("map-unlock of an empty lease: %d %q", code, errOut)
	}
	for _, bad := range []string{"0s", "1500ms", "2h"} {
		if code, _, _ := run(t, "", "map-lock", "--for", bad, srv); code != 2 {
			t.Errorf("map-lock --for %s: exit %d, want 2", bad, code)
		}
	}
}

func TestResizeCommand(t *testing.T) {
	srv := startedServer(t)
	var in strings.Builder
	for i := range 500 {
		in.WriteString(`{"emailAddress":"u` + strings.Repeat("x", i%5) + string(rune('a'+i%26)) + itoa(i) + `@example.com","customerTier":"gold"}` + "\n")
	}
	if code, _, errOut := run(t, in.String(), "import", "-", srv); code != 0 {
		t.Fatalf("import: %s", errOut)
	}
	if code, out, _ := run(t, "", "resize", srv); code != 0 || out != "1000 partitions (layout generation 0)\n" {
		t.Fatalf("resize status: %d %q", code, out)
	}
	code, out, errOut := run(t, "", "resize", "--partitions", "1500", srv)
	if code != 0 || out != "1500 partitions (layout generation 1)\n" {
		t.Fatalf("resize: %d %q %q", code, out, errOut)
	}
	if code, out, _ := run(t, "", "check", srv); code != 0 || !strings.Contains(out, "checked 1500 partitions") {
		t.Fatalf("check after the resize: %d %q", code, out)
	}
	if code, _, errOut := run(t, "", "search", "customerTier=gold", srv); code != 0 || !strings.Contains(errOut, "500 profiles") {
		t.Fatalf("search after the resize: %d %q", code, errOut)
	}
	if code, out, _ := run(t, "", "partition", "alice@example.com"); code != 0 || !strings.Contains(out, "partition-278") {
		t.Fatalf("partition: %q", out)
	}
	for _, bad := range []string{"-1", "0", "1048577"} {
		if code, _, _ := run(t, "", "resize", "--partitions", bad, srv); code != 2 {
			t.Errorf("resize --partitions %s: exit %d, want 2", bad, code)
		}
	}
	if code, _, errOut := run(t, "", "resize", "--partitions", "1500", srv); code != 1 || !strings.Contains(errOut, "already has 1500") {
		t.Fatalf("resize to the same count: %d %q", code, errOut)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// A listing that fails after its first page keeps the whole pages it
// printed, and prints no part of the next.
func TestListFailsOnALaterPage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == pmhttp.BasePath+"/partitions":
			w.Write([]byte(`{"partitions":[],"partitionsInUse":0,"totalProfiles":2,"totalPartitions":1000}`))
		case r.URL.Query().Get("cursor") == "":
			w.Write([]byte(`{"profiles":[{"emailAddress":"a@example.com","fullName":"A"}],"nextCursor":"next"}`))
		default:
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"type":"urn:partmap:problem:invalid","title":"Invalid","status":400,"detail":"the cursor is damaged"}`))
		}
	}))
	defer srv.Close()
	code, out, errOut := run(t, "", "list", "--page-size", "1", "--server", srv.URL)
	want := "EMAIL\tFULL NAME\tCOMPANY\tTIER\tPARTITION\na@example.com\tA\t\t\t" + partmap.PartitionOf("a@example.com", 1000).String() + "\n"
	if code != 1 || out != want || !strings.Contains(errOut, "the cursor is damaged") {
		t.Fatalf("got %d %q %q, want 1 and %q", code, out, errOut, want)
	}
}
