package main

import (
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// startRedis starts a redis-server on a free loopback port for one test.
func startRedis(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command("redis-server", "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatalf("redis-server (make test installs it): %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatal("redis-server did not listen")
		}
	}
}

// serve --store picks the backend by URL scheme; the same CLI works on both.
func TestServeStores(t *testing.T) {
	for name, args := range map[string][]string{
		"pebble": {"--store", "pebble://" + t.TempDir()},
		"redis":  {"--store", "redis://" + startRedis(t) + "/0"},
	} {
		t.Run(name, func(t *testing.T) {
			url, _ := serveInProcess(t, args...)
			srv := "--server=" + url
			run(t, "", "start", srv)
			if code, _, errOut := run(t, "", "put", "ada@example.com", "--name", "Ada", srv); code != 0 {
				t.Fatalf("put: %d %q", code, errOut)
			}
			if code, out, _ := run(t, "", "incr", "ada@example.com", "visits", "--by", "3", srv); code != 0 || out != "3\n" {
				t.Fatalf("incr: %d %q", code, out)
			}
			if _, out, _ := run(t, "", "get", "ada@example.com", srv); !strings.Contains(out, `"visits": "3"`) {
				t.Fatalf("get: %q", out)
			}
		})
	}
	for _, bad := range [][]string{{"--store", "mongodb://x"}, {"--store", "redis://x", "--data", "./d"}, {"--store", "pebble://"}} {
		if code, _, errOut := run(t, "", append([]string{"serve", "--addr", "127.0.0.1:0"}, bad...)...); code != 2 {
			t.Errorf("serve %q: exit %d %q, want a usage error", bad, code, errOut)
		}
	}
}
