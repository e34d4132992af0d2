package main

import (
	"strings"
	"testing"
)

func TestSearchAndCheckCommands(t *testing.T) {
	url, _ := serveInProcess(t)
	srv := "--server=" + url
	run(t, "", "start", srv)
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
	if code != 0 || !strings.Contains(out, "a@example.com\t") || strings.Contains(out, "b@example.com") || !strings.Contains(errOut, "1 profiles") {
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
	if code, _, errOut := run(t, "", "search", "fullName=x", srv); code != 1 || !strings.Contains(errOut, "not indexed") || !strings.Contains(errOut, "companyName, customerTier") {
		t.Fatalf("search by a field that is not indexed: %d %q", code, errOut)
	}

	if code, out, _ := run(t, "", "check", srv); code != 0 || !strings.Contains(out, "checked 1000 partitions") || !strings.Contains(out, "companyName, customerTier") {
		t.Fatalf("check: %d %q", code, out)
	}
	if code, out, _ := run(t, "", "check", "--partition", "5", srv); code != 0 || !strings.Contains(out, "checked 1 partitions") {
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
	url, _ := serveInProcess(t)
	srv := "--server=" + url
	run(t, "", "start", srv)
	code, lease, errOut := run(t, "", "map-lock", "--for", "30s", srv)
	lease = strings.TrimSpace(lease)
	if code != 0 || len(lease) != 32 || !strings.Contains(errOut, "map-unlock "+lease) {
		t.Fatalf("map-lock: %d %q %q", code, lease, errOut)
	}
	if code, _, errOut := run(t, "", "map-lock", srv); code != 1 || !strings.Contains(errOut, "already held") {
		t.Fatalf("a second map-lock: %d %q", code, errOut)
	}
	if code, _, _ := run(t, "", "map-unlock", lease, srv); code != 0 {
		t.Fatalf("map-unlock: %d", code)
	}
	if code, _, errOut := run(t, "", "map-unlock", lease, srv); code != 1 || !strings.Contains(errOut, "no whole-map lock") {
		t.Fatalf("a second map-unlock: %d %q", code, errOut)
	}
	for _, bad := range []string{"0s", "1500ms", "2h"} {
		if code, _, _ := run(t, "", "map-lock", "--for", bad, srv); code != 2 {
			t.Errorf("map-lock --for %s: exit %d, want 2", bad, code)
		}
	}
}
