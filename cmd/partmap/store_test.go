package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
	"github.com/partmap/partmap/internal/redistest"
	"github.com/partmap/partmap/internal/storetest"
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
		"redis-cluster": func() []string {
			c, err := testCluster()
			if err != nil {
				t.Fatal(err)
			}
			return []string{"--store", "redis-cluster://" + strings.Join(c.Addrs, ","), "--redis-min-replicas-ack", "1",
				"--redis-namespace", "stores" + strconv.FormatInt(time.Now().UnixNano(), 36)} // the cluster is shared
		}(),
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
	for _, bad := range [][]string{{"--store", "mongodb://x"}, {"--store", "redis://x", "--data", "./d"}, {"--store", "pebble://"},
		{"--store", "redis-cluster://nohostport"}, {"--redis-min-replicas-ack", "1"}, {"--redis-namespace", "x"},
		{"--store", "redis://127.0.0.1:1", "--redis-namespace", "a:b"}} {
		if code, _, errOut := run(t, "", append([]string{"serve", "--addr", "127.0.0.1:0"}, bad...)...); code != 2 {
			t.Errorf("serve %q: exit %d %q, want a usage error", bad, code, errOut)
		}
	}
}

// testCluster starts one Redis Cluster for the tests that need it; TestMain
// stops it.
var testCluster = sync.OnceValues(func() (*redistest.Cluster, error) {
	dir, err := os.MkdirTemp("", "partmap-cluster-")
	if err != nil {
		return nil, err
	}
	removeAtEnd(dir)
	return redistest.StartCluster(dir)
})

// tempDirs are what the package's shared fixtures made outside any test's
// own directory, removed when the tests end.
var (
	tempDirsMu sync.Mutex
	tempDirs   []string
)

func removeAtEnd(dir string) {
	tempDirsMu.Lock()
	defer tempDirsMu.Unlock()
	tempDirs = append(tempDirs, dir)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if c, err := testCluster(); err == nil {
		c.Stop()
	}
	for _, dir := range tempDirs {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// Two partmap servers on one Redis Cluster, with 32 clients split between
// them writing a few colliding profiles of one partition: the history is
// linearizable, so the locks in Redis serialise the two servers' writes.
func TestTwoServersOnOneCluster(t *testing.T) {
	c, err := testCluster()
	if err != nil {
		t.Fatal(err)
	}
	store := "redis-cluster://" + strings.Join(c.Addrs, ",")
	// A directory of its own: the cluster is shared, and the history must
	// start from no profiles however often the test runs.
	ns := "two" + strconv.FormatInt(time.Now().UnixNano(), 36)
	urls := []string{}
	for range 2 {
		url, _ := serveInProcess(t, "--store", store, "--lock-wait", "0", "--redis-namespace", ns)
		urls = append(urls, url)
	}
	if _, err := mustClient(t, urls[0], nil).Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var conflicts atomic.Uint64
	clients := make([]*pmhttp.Client, 32)
	history := storetest.RecordHistory(t, func(i int) partmap.Store {
		clients[i] = mustClient(t, urls[i%2], nil)
		return clients[i]
	}, storetest.LinearizabilityOptions{Clients: 32, OpsPerClient: 25, Emails: 8})
	for _, cl := range clients {
		conflicts.Add(cl.LockConflicts())
	}
	t.Logf("%d operations through two servers; %d lock conflicts retried", len(history), conflicts.Load())
	if res := storetest.CheckHistory(t, history); res != porcupine.Ok {
		t.Fatalf("porcupine: %v", res)
	}
}
