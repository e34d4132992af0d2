// Package redistest starts real redis-server processes for tests: one
// server on a private unix socket, or a 3-master, 3-replica Redis Cluster
// on free loopback ports. Debian's redis-server and redis-cli must be
// installed (make test installs them).
package redistest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Server is one redis-server without persistence.
type Server struct {
	Socket string // unix socket path
	Addr   string // and HOST:PORT on loopback, for a partmap serve --store
	cmd    *exec.Cmd
}

// StartServer starts a server whose files live in dir, with the given
// number of logical databases, and redis-server's further arguments.
func StartServer(dir string, databases int, args ...string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Server{Socket: filepath.Join(dir, "redis.sock"), Addr: fmt.Sprintf("127.0.0.1:%d", port)}
	s.cmd = exec.Command("redis-server", append([]string{"--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--unixsocket", s.Socket,
		"--unixsocketperm", "700", "--save", "", "--appendonly", "no", "--dir", dir, "--databases", fmt.Sprint(databases)}, args...)...)
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting redis-server (make test installs it): %w", err)
	}
	c := goredis.NewClient(&goredis.Options{Network: "unix", Addr: s.Socket})
	defer c.Close()
	if err := waitFor(func() bool { return c.Ping(context.Background()).Err() == nil }); err != nil {
		s.Stop()
		return nil, fmt.Errorf("redis-server did not answer")
	}
	return s, nil
}

// Stop kills the server.
func (s *Server) Stop() {
	s.cmd.Process.Kill()
	s.cmd.Wait()
}

// Cluster is a Redis Cluster of three masters, each with one replica.
type Cluster struct {
	Addrs []string // every node, HOST:PORT
	nodes []*node
}

// node is one cluster node's process.
type node struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has exited
}

func (n *node) kill() {
	n.cmd.Process.Kill()
	<-n.exited
}

// StartCluster starts six cluster-enabled servers under dir, joins them
// with redis-cli, and returns once the cluster is ok and every replica's
// link to its master is up. A replica takes over after 2 s of silence
// from its master, not the default 15 s, so that failover tests finish
// quickly.
func StartCluster(dir string) (*Cluster, error) { return StartClusterTimeout(dir, 2*time.Second) }

// StartClusterTimeout is StartCluster with another cluster-node-timeout:
// how long a master may be silent before its replica takes over.
func StartClusterTimeout(dir string, nodeTimeout time.Duration) (*Cluster, error) {
	c := &Cluster{}
	for i := range 6 {
		d := filepath.Join(dir, fmt.Sprint(i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			c.Stop()
			return nil, err
		}
		addr, n, err := startNode(d, nodeTimeout)
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.Addrs, c.nodes = append(c.Addrs, addr), append(c.nodes, n)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	if out, err := exec.Command("redis-cli", append(args, "--cluster-replicas", "1", "--cluster-yes")...).CombinedOutput(); err != nil {
		c.Stop()
		return nil, fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := waitFor(c.ready); err != nil {
		c.Stop()
		return nil, fmt.Errorf("the cluster did not become ready")
	}
	return c, nil
}

func (c *Cluster) ready() bool {
	ctx := context.Background()
	for _, a := range c.Addrs {
		cl := goredis.NewClient(&goredis.Options{Addr: a})
		info, _ := cl.ClusterInfo(ctx).Result()
		repl, _ := cl.Info(ctx, "replication").Result()
		cl.Close()
		if !strings.Contains(info, "cluster_state:ok") ||
			(strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up")) {
			return false
		}
	}
	return true
}

// URL is the cluster as partmap serve's --store names it.
func (c *Cluster) URL() string { return "redis-cluster://" + strings.Join(c.Addrs, ",") }

// Masters returns the nodes that are masters now.
func (c *Cluster) Masters() []string {
	var out []string
	for _, a := range c.Addrs {
		if c.IsMaster(a) {
			out = append(out, a)
		}
	}
	return out
}

// ReplicaOf returns the node that replicates the master at addr, or "".
func (c *Cluster) ReplicaOf(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	for _, a := range c.Addrs {
		cl := goredis.NewClient(&goredis.Options{Addr: a})
		repl, err := cl.Info(context.Background(), "replication").Result()
		cl.Close()
		if err == nil && strings.Contains(repl, "master_host:"+host+"\r") && strings.Contains(repl, "master_port:"+port+"\r") {
			return a
		}
	}
	return ""
}

// IsMaster reports whether the node at addr answers as a master.
func (c *Cluster) IsMaster(addr string) bool {
	cl := goredis.NewClient(&goredis.Options{Addr: addr})
	defer cl.Close()
	repl, err := cl.Info(context.Background(), "replication").Result()
	return err == nil && strings.Contains(repl, "role:master")
}

// Kill sends SIGKILL to the node at addr.
func (c *Cluster) Kill(addr string) error {
	for i, a := range c.Addrs {
		if a == addr {
			c.nodes[i].kill()
			return nil
		}
	}
	return fmt.Errorf("no node %s", addr)
}

// Stop kills every node.
func (c *Cluster) Stop() {
	for _, n := range c.nodes {
		n.kill()
	}
}

// startNode starts a cluster node in dir on a free port pair and returns
// once it answers, as itself: its port, or its bus port 10000 above, may
// be taken between the pick and its bind (another test's node, picked at
// random from the same range), and then redis-server exits, or, worse, a
// dial reaches the other node. A node that exits for a taken address is
// started again on other ports; any other failure names the node's log.
func startNode(dir string, nodeTimeout time.Duration) (string, *node, error) {
	logPath := filepath.Join(dir, "redis.log")
	for attempt := 1; ; attempt++ {
		port, err := pickClusterPort()
		if err != nil {
			return "", nil, err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		os.Remove(filepath.Join(dir, "nodes.conf"))
		cmd := exec.Command("redis-server", "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf", "--dir", dir, "--save", "", "--appendonly", "no",
			"--repl-diskless-sync-delay", "0", "--logfile", logPath,
			"--cluster-node-timeout", fmt.Sprint(nodeTimeout.Milliseconds()))
		if err := cmd.Start(); err != nil {
			return "", nil, fmt.Errorf("starting redis-server (make test installs it): %w", err)
		}
		n := &node{cmd: cmd, exited: make(chan struct{})}
		go func() { cmd.Wait(); close(n.exited) }()
		if answersAs(addr, cmd.Process.Pid, n.exited) {
			return addr, n, nil
		}
		n.kill()
		log, _ := os.ReadFile(logPath)
		if attempt < 5 && strings.Contains(string(log), "Address already in use") {
			continue
		}
		return "", nil, fmt.Errorf("%s did not listen; its log:\n%s", addr, log)
	}
}

// answersAs waits until the server at addr says it is process pid, and
// reports false if the process exits first or 30 s pass.
func answersAs(addr string, pid int, exited <-chan struct{}) bool {
	cl := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 500 * time.Millisecond})
	defer cl.Close()
	want := fmt.Sprintf("process_id:%d\r", pid)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case <-exited:
			return false
		default:
		}
		if info, err := cl.Info(context.Background(), "server").Result(); err == nil && strings.Contains(info, want) {
			return true
		}
	}
	return false
}

// freeClusterPort returns a port that is free, and whose cluster bus port
// (10000 above it) is free too, both below the kernel's range of
// ephemeral ports: a port from that range can be taken by any outgoing
// connection between the pick and redis-server's bind, and a node whose
// bus port is taken never listens (TestClusterFailover failed so, once).
var pickClusterPort = freeClusterPort // a test's to replace

func freeClusterPort() (int, error) {
	low := 32768 // Linux's default start of the range
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 12000 {
				low = n
			}
		}
	}
	for range 100 {
		port := 1024 + rand.IntN(low-10000-1024)
		if bindable(port) && bindable(port+10000) {
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free pair of ports below %d", low)
}

func bindable(port int) bool {
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func waitFor(ok func() bool) error {
	for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out")
		}
	}
	return nil
}
