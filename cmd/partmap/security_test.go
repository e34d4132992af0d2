package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/partmap/partmap/internal/testcert"
)

func TestServeRefusesOpenAddressWithoutAuth(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		code, _, errOut := run(t, "", "serve", "--addr", addr, "--data", data)
		if code != 2 || !strings.Contains(errOut, "without --auth-file") {
			t.Fatalf("serve --addr %s: exit %d %q", addr, code, errOut)
		}
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatal("a refused serve created its data directory")
	}
	// --insecure overrides, and loopback names need nothing.
	serveInProcess(t, "--addr", "0.0.0.0:0", "--insecure")
	serveInProcess(t, "--addr", "localhost:0")
}

func TestTokensThroughTheCLI(t *testing.T) {
	auth := filepath.Join(t.TempDir(), "auth")
	code, adminTok, errOut := run(t, "", "token", "--name", "ops", "--scope", "admin", "--auth-file", auth)
	if code != 0 || !strings.HasPrefix(adminTok, "pm_") || !strings.Contains(errOut, "added") {
		t.Fatalf("token: %d %q %q", code, adminTok, errOut)
	}
	_, readTok, _ := run(t, "", "token", "--name", "viewer", "--scope", "read", "--auth-file", auth)
	adminTok, readTok = strings.TrimSpace(adminTok), strings.TrimSpace(readTok)
	if b, _ := os.ReadFile(auth); strings.Contains(string(b), adminTok) {
		t.Fatal("the auth file holds a token in clear")
	}
	if code, _, errOut := run(t, "", "token", "--name", "x", "--scope", "root"); code != 2 || !strings.Contains(errOut, "scope") {
		t.Fatalf("bad scope: %d %q", code, errOut)
	}
	if code, _, errOut := run(t, "", "token", "--scope", "read"); code != 2 || !strings.Contains(errOut, "--name is required") {
		t.Fatalf("no name: %d %q", code, errOut)
	}
	// A second token of one name would make serve refuse the file.
	if code, tok, errOut := run(t, "", "token", "--name", "ops", "--scope", "read", "--auth-file", auth); code != 1 || tok != "" || !strings.Contains(errOut, `already has a token named "ops"`) {
		t.Fatalf("a second ops: %d %q %q", code, tok, errOut)
	}

	url, _ := serveInProcess(t, "--auth-file", auth)
	srv := "--server=" + url
	if code, _, errOut := run(t, "", "start", srv); code != 1 || !strings.Contains(errOut, "unauthorized") || !strings.Contains(errOut, "--token or $PARTMAP_TOKEN") {
		t.Fatalf("start without a token: %d %q", code, errOut)
	}
	if code, _, errOut := run(t, "", "start", srv, "--token", readTok); code != 1 || !strings.Contains(errOut, "forbidden") {
		t.Fatalf("start with a read token: %d %q", code, errOut)
	}
	if code, out, errOut := run(t, "", "start", srv, "--token", adminTok); code != 0 || out != "started\n" {
		t.Fatalf("start with an admin token: %d %q %q", code, out, errOut)
	}
	t.Setenv("PARTMAP_TOKEN", adminTok)
	if code, _, errOut := run(t, "", "put", "a@example.com", "--name", "A", srv); code != 0 {
		t.Fatalf("put with PARTMAP_TOKEN: %d %q", code, errOut)
	}
	if code, _, errOut := run(t, "", "delete", "a@example.com", srv, "--token", readTok); code != 1 || !strings.Contains(errOut, "forbidden") {
		t.Fatalf("--token overrides PARTMAP_TOKEN: %d %q", code, errOut)
	}
}

func TestTLS(t *testing.T) {
	cert, key, _ := testcert.Write(t)
	url, _ := serveInProcess(t, "--tls-cert", cert, "--tls-key", key)
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("serving %s, want https", url)
	}
	if code, _, errOut := run(t, "", "start", "--server", url); code != 1 || !strings.Contains(errOut, "certificate") {
		t.Fatalf("an untrusted certificate was accepted: %d %q", code, errOut)
	}
	if code, out, errOut := run(t, "", "start", "--server", url, "--ca-cert", cert); code != 0 || out != "started\n" {
		t.Fatalf("start over TLS: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := run(t, "", "serve", "--tls-cert", cert); code != 2 || !strings.Contains(errOut, "go together") {
		t.Fatalf("--tls-cert alone: %d %q", code, errOut)
	}
}
