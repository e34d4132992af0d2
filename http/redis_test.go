package http_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
	"github.com/partmap/partmap/internal/redistest"
	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/redis"
)

// The HTTP semantics hold on every store: the conformance suite runs through
// the Go client and the server against a Redis server and a Redis Cluster,
// as it does against Pebble (TestConformance).
var redisServers = sync.OnceValues(func() (*redistest.Cluster, error) {
	dir, err := os.MkdirTemp("", "partmap-http-redis-")
	if err != nil {
		return nil, err
	}
	removeAtEnd(dir)
	return redistest.StartCluster(filepath.Join(dir, "cluster"))
})

var single = sync.OnceValues(func() (*redistest.Server, error) {
	dir, err := os.MkdirTemp("", "partmap-http-redis-")
	if err != nil {
		return nil, err
	}
	removeAtEnd(dir)
	return redistest.StartServer(dir, 1)
})

// tempDirs are the shared servers' directories, removed when the tests end.
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
	if c, err := redisServers(); err == nil {
		c.Stop()
	}
	if s, err := single(); err == nil {
		s.Stop()
	}
	for _, dir := range tempDirs {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

var namespaces atomic.Int64

func TestConformanceOnRedis(t *testing.T) {
	for name, client := range map[string]func(t *testing.T) goredis.UniversalClient{
		"Server": func(t *testing.T) goredis.UniversalClient {
			s, err := single()
			if err != nil {
				t.Fatal(err)
			}
			return goredis.NewClient(&goredis.Options{Network: "unix", Addr: s.Socket})
		},
		"Cluster": func(t *testing.T) goredis.UniversalClient {
			c, err := redisServers()
			if err != nil {
				t.Fatal(err)
			}
			return goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.Addrs})
		},
	} {
		t.Run(name+"/ExportDeadlines", func(t *testing.T) {
			storetest.RunExportDeadlines(t, func(t *testing.T, clock func() time.Time) (partmap.Store, func(context.Context) error) {
				ns := fmt.Sprintf("http%d", namespaces.Add(1))
				store, err := redis.Open(context.Background(), client(t), &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1, Clock: clock, SweepInterval: -1}, Namespace: ns})
				if err != nil {
					t.Fatal(err)
				}
				srv := httptest.NewServer(pmhttp.NewServer(store, nil))
				t.Cleanup(func() {
					srv.Close()
					store.Close()
				})
				return newClient(t, srv.URL, nil), func(ctx context.Context) error { _, err := store.Sweep(ctx); return err }
			})
		})
		t.Run(name, func(t *testing.T) {
			storetest.RunStore(t, func(t *testing.T) partmap.Store {
				ns := fmt.Sprintf("http%d", namespaces.Add(1))
				store, err := redis.Open(context.Background(), client(t), &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}, Namespace: ns})
				if err != nil {
					t.Fatal(err)
				}
				srv := httptest.NewServer(pmhttp.NewServer(store, nil))
				t.Cleanup(func() {
					srv.Close()
					store.Close()
				})
				return newClient(t, srv.URL, nil)
			})
		})
	}
}
