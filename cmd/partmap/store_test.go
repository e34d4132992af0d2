package main

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
	"github.com/partmap/partmap/internal/redistest"
	"github.com/partmap/partmap/internal/storetest"
)

// serve --store picks the backend by URL scheme; the same CLI works on both.
func TestServeStores(t *testing.T) {
	for name, args := range map[string][]string{
		"pebble":        {"--store", "pebble://" + t.TempDir()},
		"redis":         {"--store", "redis://" + redistest.StartTestServer(t).Addr + "/0"},
		"redis-cluster": append(onSharedCluster(t, "stores"), "--redis-min-replicas-ack", "1"),
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

// shared is the Redis Cluster of the tests that need one, and the built
// binary's directory.
var shared = redistest.Shared{Prefix: "partmap-test-"}

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Stop()
	os.Exit(code)
}

// onSharedCluster is serve's flags for a directory of its own, its
// namespace named after name, on the shared Redis Cluster.
func onSharedCluster(t *testing.T, name string) []string {
	t.Helper()
	return []string{"--store", sharedCluster(t).URL(), "--redis-namespace", name + strconv.FormatInt(time.Now().UnixNano(), 36)}
}

// sharedCluster is the shared Redis Cluster, or the test fails.
func sharedCluster(t *testing.T) *redistest.Cluster {
	t.Helper()
	c, err := shared.Cluster()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Two partmap servers on one Redis Cluster, with 32 clients split between
// them writing a few colliding profiles of one partition: the history is
// linearizable, so the locks in Redis serialise the two servers' writes.
func TestTwoServersOnOneCluster(t *testing.T) {
	// A directory of its own: the cluster is shared, and the history must
	// start from no profiles however often the test runs.
	args := append(onSharedCluster(t, "two"), "--lock-wait", "0")
	urls := []string{}
	for range 2 {
		url, _ := serveInProcess(t, args...)
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
