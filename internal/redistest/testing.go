package redistest

import (
	"os"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// StartTestServer starts a server of the test's own, with one database,
// stopped when the test ends.
func StartTestServer(t testing.TB) *Server {
	t.Helper()
	s, err := StartServer(t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// SearchModule is Debian's RediSearch module (package redis-redisearch,
// RediSearch 1.2), which make test installs.
const SearchModule = "/usr/lib/redis/modules/redisearch.so"

// StartSearchTestServer starts a server of the test's own with the
// RediSearch module loaded, stopped when the test ends.
func StartSearchTestServer(t testing.TB) *Server {
	t.Helper()
	if _, err := os.Stat(SearchModule); err != nil {
		t.Fatalf("RediSearch is not installed (make test installs redis-redisearch): %v", err)
	}
	s, err := StartServer(t.TempDir(), 1, "--loadmodule", SearchModule)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// StartTestCluster starts a Redis Cluster of the test's own, whose
// replicas take over after nodeTimeout (StartClusterTimeout), stopped and
// removed when the test ends.
func StartTestCluster(t testing.TB, nodeTimeout time.Duration) *Cluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "partmap-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	c, err := StartClusterTimeout(dir, nodeTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// Client is a client of s on its unix socket, closed when the test ends.
func (s *Server) Client(t testing.TB) *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Network: "unix", Addr: s.Socket})
	t.Cleanup(func() { c.Close() })
	return c
}
