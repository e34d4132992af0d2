package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/auth"
	pmhttp "github.com/partmap/partmap/http"
	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/internal/testcert"
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
	if _, _, err := partmap.UpsertProfile(ctx, cl, partmap.Profile{partmap.FieldEmail: "bob@example.com", "fullName": "Bob"}, partmap.Condition{}); err != nil {
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

// Pipelined writes over the Redis protocol are durable once answered:
// clients pipeline HINCRBYs while the server is SIGKILLed, and after each
// restart every counter holds at least what its last reply said, and no
// more than was sent.
func TestRESPCrash(t *testing.T) {
	bin := binary(t)
	data := t.TempDir()
	httpAddr, respAddr := freeAddr(t), freeAddr(t)
	start := func() *exec.Cmd {
		t.Helper()
		cmd := exec.Command(bin, "serve", "--addr", httpAddr, "--resp-addr", respAddr, "--data", data)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		c := goredis.NewClient(&goredis.Options{Addr: respAddr, DisableIdentity: true, MaxRetries: -1})
		defer c.Close()
		for i := 0; c.Ping(context.Background()).Err() != nil; i++ {
			if i == 300 {
				t.Fatal("the server did not answer PING in 30 s")
			}
			time.Sleep(100 * time.Millisecond)
		}
		return cmd
	}
	cmd := start()
	cl, err := pmhttp.NewClient("http://"+httpAddr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	const workers, keys = 8, 4
	type counter struct{ acked, sent int64 }
	counters := make([][keys]counter, workers)
	key := func(w, i int) string { return fmt.Sprintf("crash%d-%d@x.io", w, i) }
	rng := rand.New(rand.NewPCG(1, 2))
	total := int64(0)
	for cycle := range storetest.CrashCycles(t, 3) {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				c := goredis.NewClient(&goredis.Options{Addr: respAddr, DisableIdentity: true, MaxRetries: -1})
				defer c.Close()
				ctx := context.Background()
				for {
					var cmds []*goredis.IntCmd
					_, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
						for j := range 8 {
							cmds = append(cmds, p.HIncrBy(ctx, key(w, j%keys), "n", 1))
							counters[w][j%keys].sent++
						}
						return nil
					})
					if err != nil {
						return // the server is gone
					}
					for j, cmd := range cmds {
						counters[w][j%keys].acked = cmd.Val()
					}
				}
			})
		}
		time.Sleep(time.Duration(300+rng.IntN(500)) * time.Millisecond)
		cmd.Process.Kill()
		wg.Wait()
		cmd.Wait()
		cmd = start()
		c := goredis.NewClient(&goredis.Options{Addr: respAddr, DisableIdentity: true})
		for w := range workers {
			for i := range keys {
				v, err := c.HGet(context.Background(), key(w, i), "n").Int64()
				if err != nil && err != goredis.Nil {
					t.Fatal(err)
				}
				k := &counters[w][i]
				if v < k.acked || v > k.sent {
					t.Fatalf("cycle %d: %s holds %d; %d were acknowledged and %d sent", cycle, key(w, i), v, k.acked, k.sent)
				}
				total += k.acked
				k.acked, k.sent = v, v
			}
		}
		c.Close()
	}
	if total == 0 {
		t.Fatal("no increment was acknowledged: the kills tested nothing")
	}
	t.Logf("%d acknowledged increments checked after the kills", total)
}

// With --tls-cert, the Redis protocol is served over TLS too; with an auth
// file, AUTH takes a token.
func TestServeRESPOverTLSWithTokens(t *testing.T) {
	cert, key, pool := testcert.Write(t)
	tok, line, err := auth.NewToken("ops", auth.ScopeWrite)
	if err != nil {
		t.Fatal(err)
	}
	auth := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(auth, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	serveInProcess(t, "--tls-cert", cert, "--tls-key", key, "--auth-file", auth, "--resp-addr", addr)
	ctx := context.Background()
	plain := goredis.NewClient(&goredis.Options{Addr: addr, DisableIdentity: true, MaxRetries: -1})
	defer plain.Close()
	if err := plain.Ping(ctx).Err(); err == nil {
		t.Fatal("a client without TLS was answered")
	}
	c := goredis.NewClient(&goredis.Options{Addr: addr, Password: tok, DisableIdentity: true, TLSConfig: &tls.Config{RootCAs: pool}})
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING over TLS with a token: %v", err)
	}
	// The directory is not started yet: the store says so.
	if err := c.HSet(ctx, "a@x.io", "f", "v").Err(); err == nil || !strings.Contains(err.Error(), "not started") {
		t.Fatalf("HSET before start: %v", err)
	}
	bad := goredis.NewClient(&goredis.Options{Addr: addr, Password: "wrong", DisableIdentity: true, TLSConfig: &tls.Config{RootCAs: pool}})
	defer bad.Close()
	if err := bad.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("a wrong token: %v", err)
	}
}
