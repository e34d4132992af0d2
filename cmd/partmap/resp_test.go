package main

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
)

// partmap serve --resp-addr: redis-cli (interactive commands, and --pipe
// mass insertion) and the HTTP API read and write one directory.
func TestServeRESP(t *testing.T) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatal("redis-cli is not installed (Debian's redis-tools; make deps installs it)")
	}
	addr := freeAddr(t)
	url, _ := serveInProcess(t, "--resp-addr", addr)
	ctx := context.Background()
	cl, err := pmhttp.NewClient(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(addr)
	redis := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(cli, append([]string{"-h", host, "-p", port}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli %q: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if out := redis("", "HSET", "Alice@Example.COM", "fullName", "Alice", "customerTier", "gold"); out != "2" {
		t.Fatalf("HSET: %q", out)
	}
	rec, err := cl.FindProfile(ctx, "alice@example.com")
	if err != nil || rec.Profile["fullName"] != "Alice" || rec.Profile[partmap.FieldCustomerTier] != "gold" {
		t.Fatalf("over HTTP after HSET: %v %v", rec.Profile, err)
	}
	if _, _, err := cl.UpsertProfile(ctx, partmap.Profile{partmap.FieldEmail: "bob@example.com", "fullName": "Bob"}, partmap.Condition{}); err != nil {
		t.Fatal(err)
	}
	if out := redis("", "HGET", "BOB@example.com", "fullName"); out != "Bob" {
		t.Fatalf("HGET of a profile PUT over HTTP: %q", out)
	}
	if out := redis("", "TYPE", "bob@example.com"); out != "hash" {
		t.Fatalf("TYPE: %q", out)
	}

	// Mass insertion, as Redis documents it: the protocol on stdin.
	var proto strings.Builder
	const n = 500
	for i := range n {
		args := []string{"HSET", fmt.Sprintf("mass%d@example.com", i), "fullName", "Mass " + strconv.Itoa(i)}
		fmt.Fprintf(&proto, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&proto, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	if out := redis(proto.String(), "--pipe"); !strings.Contains(out, "errors: 0, replies: "+strconv.Itoa(n)) {
		t.Fatalf("--pipe: %s", out)
	}
	if out := redis("", "DBSIZE"); out != strconv.Itoa(n+2) {
		t.Fatalf("DBSIZE after the mass insertion: %q", out)
	}
	st, err := cl.ListPartitions(ctx)
	if err != nil || st.TotalProfiles != n+2 {
		t.Fatalf("over HTTP, %d profiles, %v", st.TotalProfiles, err)
	}
}

// The loopback rule holds for the Redis protocol's address too.
func TestServeRESPNeedsAuthOffLoopback(t *testing.T) {
	code, _, stderr := run(t, "", "serve", "--data", t.TempDir(), "--resp-addr", "0.0.0.0:0")
	if code != 2 || !strings.Contains(stderr, "refusing to serve 0.0.0.0:0 without --auth-file") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}
