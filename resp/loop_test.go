//go:build linux

package resp_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/resp"
)

// rawClient is a connection that sends commands as bytes and reads
// replies a line at a time.
type rawClient struct {
	net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawClient {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawClient{c, bufio.NewReader(c)}
}

func (c *rawClient) send(t *testing.T, args ...string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
}

func (c *rawClient) line(t *testing.T) string {
	t.Helper()
	l, err := c.r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(l, "\r\n")
}

// The writes of many clients that arrive together commit together: while
// the loop is held in one client's write, fifteen others send theirs, and
// the next turn runs them as one transaction. Each gets its own reply.
func TestLoopGroupsTheWritesOfClients(t *testing.T) {
	_, store := serve(t, nil)
	g := storetest.NewGated(store)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := resp.New(g, &resp.Options{EventLoop: true})
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()
	const others = 15
	clients := make([]*rawClient, others+1)
	for i := range clients {
		clients[i] = dialRaw(t, addr)
		clients[i].send(t, "PING") // accepted and served before the writes
		if got := clients[i].line(t); got != "+PONG" {
			t.Fatalf("PING: %q", got)
		}
	}
	clients[0].send(t, "HSET", "first@x.io", "n", "0")
	<-g.Entered
	for i, c := range clients[1:] {
		c.send(t, "HINCRBY", fmt.Sprintf("c%d@x.io", i), "n", "7")
	}
	close(g.Gate)
	if got := clients[0].line(t); got != ":1" {
		t.Fatalf("the first client's HSET: %q", got)
	}
	for i, c := range clients[1:] {
		if got := c.line(t); got != ":7" {
			t.Fatalf("client %d's HINCRBY: %q", i+1, got)
		}
	}
	calls := g.Calls()
	if !slices.Equal(calls, []int{1, others}) {
		t.Fatalf("write calls of %v operations; want the first alone, then one of all %d others", calls, others)
	}
	for i := range others {
		rec, err := store.FindProfile(context.Background(), fmt.Sprintf("c%d@x.io", i))
		if err != nil || rec.Profile["n"] != "7" {
			t.Fatalf("c%d: %v %v", i, rec.Profile, err)
		}
	}
}

// A write to a locked partition waits for it in a later turn while the
// loop serves every other client; it is answered once the lock is gone,
// and with TRYAGAIN if the lock outlasts the retries.
func TestLoopWaitsOutALockedPartition(t *testing.T) {
	ctx := context.Background()
	addr, store := serve(t, &resp.Options{EventLoop: true})
	held, err := store.LockWholeMap(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	writer, other := dialRaw(t, addr), client(t, addr, 2)
	writer.send(t, "HSET", "w@x.io", "f", "1")
	writer.send(t, "HGET", "w@x.io", "f") // after the write, in order
	began := time.Now()
	for time.Since(began) < 300*time.Millisecond {
		if err := other.Ping(ctx).Err(); err != nil {
			t.Fatalf("another client while a write waits: %v", err)
		}
		if err := other.HGet(ctx, "nobody@x.io", "f").Err(); err != goredis.Nil {
			t.Fatalf("a read while a write waits: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	writer.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := writer.r.Peek(1); err == nil {
		t.Fatal("the write was answered while the whole map was locked")
	}
	writer.SetReadDeadline(time.Now().Add(20 * time.Second))
	if err := store.UnlockWholeMap(ctx, held.Lease); err != nil {
		t.Fatal(err)
	}
	if got, val := writer.line(t), writer.line(t)+writer.line(t); got != ":1" || val != "$11" {
		t.Fatalf("after the release: %q then %q; want :1 then the value 1", got, val)
	}

	if held, err = store.LockWholeMap(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	defer store.UnlockWholeMap(ctx, held.Lease)
	began = time.Now()
	writer.send(t, "HSET", "w@x.io", "f", "2")
	if got := writer.line(t); !strings.HasPrefix(got, "-TRYAGAIN ") {
		t.Fatalf("a write under a lock that outlasts its retries: %q", got)
	}
	if time.Since(began) < 2*time.Second {
		t.Fatalf("TRYAGAIN after %v, before the retries' 2 s", time.Since(began))
	}
}
