package redis_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/redis"
)

// cluster is a 3-master, 3-replica Redis Cluster that the tests start on
// private ports and directories, and stop at the end.
var cluster struct {
	addrs []string
	procs []*exec.Cmd
	ns    atomic.Int64
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// startCluster starts six cluster-enabled servers, joins them with
// redis-cli, and waits until the cluster is ok and every replica's link to
// its master is up.
func startCluster(dir string) error {
	for i := range 6 {
		port, err := freePort()
		if err != nil {
			return err
		}
		d := filepath.Join(dir, fmt.Sprint(i))
		os.MkdirAll(d, 0o755)
		cmd := exec.Command("redis-server", "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf", "--dir", d, "--save", "", "--appendonly", "no", "--repl-diskless-sync-delay", "0")
		if err := cmd.Start(); err != nil {
			return err
		}
		cluster.procs = append(cluster.procs, cmd)
		cluster.addrs = append(cluster.addrs, fmt.Sprintf("127.0.0.1:%d", port))
	}
	for _, a := range cluster.addrs {
		if err := waitFor(func() bool {
			c, err := net.Dial("tcp", a)
			ok := err == nil
			if ok {
				c.Close()
			}
			return ok
		}); err != nil {
			return fmt.Errorf("%s did not listen", a)
		}
	}
	args := append([]string{"--cluster", "create"}, cluster.addrs...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out)
	}
	ctx := context.Background()
	return waitFor(func() bool {
		for _, a := range cluster.addrs {
			c := goredis.NewClient(&goredis.Options{Addr: a})
			info, _ := c.ClusterInfo(ctx).Result()
			repl, _ := c.Info(ctx, "replication").Result()
			c.Close()
			if !strings.Contains(info, "cluster_state:ok") ||
				(strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up")) {
				return false
			}
		}
		return true
	})
}

func stopCluster() {
	for _, p := range cluster.procs {
		p.Process.Kill()
		p.Wait()
	}
}

func waitFor(ok func() bool) error {
	for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out")
		}
	}
	return nil
}

// openCluster returns a store on the cluster, in a namespace of its own.
func openCluster(t *testing.T, opts *redis.Options) *redis.Store {
	t.Helper()
	o := redis.Options{}
	if opts != nil {
		o = *opts
	}
	o.Namespace = fmt.Sprintf("t%d", cluster.ns.Add(1))
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: cluster.addrs})
	s, err := redis.Open(context.Background(), c, &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestClusterConformance(t *testing.T) {
	storetest.RunStore(t, func(t *testing.T) partmap.Store { return openCluster(t, nil) })
}

func TestClusterEngine(t *testing.T) {
	storetest.RunEngine(t, func(t *testing.T, wait time.Duration) *engine.Engine {
		if wait == 0 {
			wait = -1
		}
		return openCluster(t, &redis.Options{LockWait: wait}).Engine()
	})
}

func TestClusterModel(t *testing.T) {
	storetest.RunModel(t, func(t *testing.T) partmap.Store { return openCluster(t, nil) })
}
