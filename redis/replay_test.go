package redis_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
)

// cutProxy relays TCP connections to the test's redis-server. Once armed
// with a marker, the next client write that contains it still reaches
// Redis, which runs it, but the client is hung up on before Redis's reply
// reaches it: a command that ran and whose reply was lost, as when a
// connection breaks at the wrong moment.
type cutProxy struct {
	ln     net.Listener
	marker atomic.Pointer[[]byte]
	cuts   atomic.Int32
	wg     sync.WaitGroup
}

func startCutProxy(t *testing.T) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() { defer p.wg.Done(); p.relay(c) }()
		}
	}()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *cutProxy) arm(marker string) { m := []byte(marker); p.marker.Store(&m) }

func (p *cutProxy) relay(client net.Conn) {
	defer client.Close()
	upstream, err := net.Dial("unix", server.socket)
	if err != nil {
		return
	}
	defer upstream.Close()
	var cut atomic.Bool // the client's last write held the marker
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64<<10)
		for {
			n, err := client.Read(buf)
			if n > 0 {
				if m := p.marker.Load(); m != nil && bytes.Contains(buf[:n], *m) && p.marker.CompareAndSwap(m, nil) {
					cut.Store(true)
				}
				if _, err := upstream.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				upstream.Close()
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := upstream.Read(buf)
		if n > 0 && cut.Load() {
			p.cuts.Add(1)
			client.Close() // the reply is lost
			break
		}
		if n > 0 {
			if _, err := client.Write(buf[:n]); err != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	client.Close()
	<-done
}

// A write whose reply is lost is never sent again by the client library:
// it ran once, and its outcome is reported as unknown rather than as a
// conflict (a replayed commit would meet its own write, and the engine
// would then apply it a second time), for a one-partition increment and
// for a transaction's commit point; before the commit point, the
// transaction is aborted and says that nothing was written. With
// go-redis's default retries, the increment answered 2 after one
// increment of 1 from 0, and the transaction, which committed, answered
// that nothing was written.
func TestLostReplyIsNotReplayed(t *testing.T) {
	ctx := context.Background()
	proxy := startCutProxy(t)
	db := int(server.nextDB.Add(1) % databases)
	// go-redis's defaults: up to 3 retries of a command after a network error.
	c := goredis.NewClient(&goredis.Options{Addr: proxy.ln.Addr().String(), DB: db})
	if err := c.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	s := mustOpen(t, c, nil)
	if _, err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cuts := int32(0)
	unknown := func(t *testing.T, err error) {
		t.Helper()
		if n := proxy.cuts.Load(); n != cuts+1 {
			t.Fatalf("the proxy cut %d connections, want 1", n-cuts)
		}
		cuts++
		var perr *partmap.Error
		if !errors.As(err, &perr) || perr.Code != partmap.EUNAVAILABLE || !strings.Contains(perr.Message, "unknown") && !strings.Contains(perr.Message, "may or may not") {
			t.Fatalf("a write whose reply was lost: %v, want an unavailable error that says its outcome is unknown", err)
		}
	}

	t.Run("Increment", func(t *testing.T) {
		const email = "counter@example.com"
		if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: email}, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
		proxy.arm("$6\r\ncommit\r\n") // the commit script's mode
		inc, err := partmap.IncrementField(ctx, s, email, "visits", 1, partmap.Condition{})
		if err == nil {
			t.Fatalf("the increment answered %d, as if its reply had come", inc.Value)
		}
		unknown(t, err)
		p, err := s.FindProfile(ctx, email)
		if err != nil {
			t.Fatal(err)
		}
		if p.Profile["visits"] != "1" {
			t.Fatalf("visits = %q after one increment of 1, want 1", p.Profile["visits"])
		}
	})

	t.Run("Transaction", func(t *testing.T) {
		// Two profiles in different partitions, so that the write is a
		// transaction with a commit point.
		a, b := "alice@example.com", "bob@example.com"
		_, pa, _ := partmap.Locate(a, partmap.DefaultPartitions)
		_, pb, _ := partmap.Locate(b, partmap.DefaultPartitions)
		if pa == pb {
			t.Fatal("the two profiles share a partition")
		}
		for _, e := range []string{a, b} {
			if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: e, "balance": "10"}, partmap.Condition{}); err != nil {
				t.Fatal(err)
			}
		}
		transfer := []partmap.Operation{
			{Op: partmap.OpIncrement, Email: a, Field: "balance", By: -1},
			{Op: partmap.OpIncrement, Email: b, Field: "balance", By: 1},
		}
		balances := func(t *testing.T, want map[string]int) {
			t.Helper()
			for e, n := range want {
				p, err := s.FindProfile(ctx, e)
				if err != nil {
					t.Fatal(err)
				}
				if got, _ := strconv.Atoi(p.Profile["balance"]); got != n {
					t.Errorf("%s's balance = %q, want %d", e, p.Profile["balance"], n)
				}
			}
		}
		proxy.arm("$6\r\ndecide\r\n")
		_, err := s.Transact(ctx, transfer)
		unknown(t, err)
		// The commit point ran: the transfer happened, once.
		balances(t, map[string]int{a: 9, b: 11})

		// A lost reply before the commit point: nothing was written, and
		// the error says so; the next transfer goes through.
		proxy.arm("$7\r\nprepare\r\n")
		_, err = s.Transact(ctx, transfer)
		var perr *partmap.Error
		if !errors.As(err, &perr) || perr.Code != partmap.EUNAVAILABLE || strings.Contains(perr.Message, "may or may not") || proxy.cuts.Load() != cuts+1 {
			t.Fatalf("a prepare whose reply was lost (%d cut): %v, want an unavailable error", proxy.cuts.Load()-cuts, err)
		}
		cuts++
		balances(t, map[string]int{a: 9, b: 11})
		if _, err := s.Transact(ctx, transfer); err != nil {
			t.Fatal(err)
		}
		balances(t, map[string]int{a: 8, b: 12})
	})
}
