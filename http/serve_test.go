package http_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/partmap/partmap/internal/testcert"

	pmhttp "github.com/partmap/partmap/http"
)

// serve runs Serve on a free loopback port and returns its address and the
// channel that gets Serve's result.
func serve(t *testing.T, ctx context.Context, opts *pmhttp.ServeOptions) (addr string, served chan error) {
	t.Helper()
	store := newStore(t, nil)
	ln, err := pmhttp.Listen("127.0.0.1:0", "", "")
	if err != nil {
		t.Fatal(err)
	}
	served = make(chan error, 1)
	go func() {
		served <- pmhttp.NewServer(store, &pmhttp.ServerOptions{Logger: newTextLogger(io.Discard)}).Serve(ctx, ln, opts)
	}()
	addr = ln.Addr().String()
	start(t, "http://"+addr)
	return addr, served
}

// startPut sends a PUT whose body is one byte short, so that it stays in
// flight until finish sends that byte and reads the reply.
func startPut(t *testing.T, addr string) (finish func() (status int, err error)) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	body := `{"emailAddress":"slow@example.com"}`
	io.WriteString(conn, "PUT "+base+"/customer-profile HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "+
		strconv.Itoa(len(body))+"\r\n\r\n"+body[:len(body)-1])
	waitInFlight(t, addr, 1) // a request the server has not read when it shuts down goes unanswered
	return func() (int, error) {
		io.WriteString(conn, body[len(body)-1:])
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
}

// waitInFlight waits until the server at addr is serving n requests (the
// scrape that asks not counted).
func waitInFlight(t *testing.T, addr string, n int) {
	t.Helper()
	want := "partmap_http_requests_in_flight " + strconv.Itoa(n+1) + "\n"
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if r := send(t, "GET", "http://"+addr+"/metrics", nil); strings.Contains(string(r.body), want) {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("the server never served %d requests at once: %s", n, r.body)
		}
	}
}

func TestServe(t *testing.T) {
	// Once the context is done, a request in flight still gets its reply,
	// and Serve returns nil after it.
	t.Run("OK", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		addr, served := serve(t, ctx, &pmhttp.ServeOptions{ShutdownTimeout: 10 * time.Second})
		finish := startPut(t, addr)
		cancel()
		select {
		case err := <-served:
			t.Fatalf("Serve returned %v with a request in flight", err)
		case <-time.After(100 * time.Millisecond):
		}
		if status, err := finish(); err != nil || status != http.StatusCreated {
			t.Fatalf("the request in flight: %d %v, want 201", status, err)
		}
		if err := <-served; err != nil {
			t.Fatalf("Serve: %v", err)
		}
		if conn, err := net.Dial("tcp", addr); err == nil {
			conn.Close()
			t.Fatal("the listener is still open")
		}
	})
	t.Run("ErrShutdownTimeout", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		addr, served := serve(t, ctx, &pmhttp.ServeOptions{ShutdownTimeout: 100 * time.Millisecond})
		startPut(t, addr) // and never finish it
		cancel()
		if err := <-served; !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), "shutdown: ") {
			t.Fatalf("Serve: %v, want a shutdown deadline", err)
		}
	})
	// Headers that never end are cut off, and oversized ones refused.
	t.Run("ErrHeaders", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		addr, _ := serve(t, ctx, &pmhttp.ServeOptions{ReadHeaderTimeout: 200 * time.Millisecond})
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		io.WriteString(conn, "GET "+base+"/partitions HTTP/1.1\r\nHost: x\r\n") // and never the blank line
		conn.SetReadDeadline(time.Now().Add(20 * time.Second))                  // a safety net, not a measurement
		if _, err := io.ReadAll(conn); err != nil {
			t.Fatalf("the server kept a header-less connection open: %v", err)
		}
		r := send(t, "GET", "http://"+addr+base+"/partitions", nil, "X-Big", strings.Repeat("a", 200<<10))
		if r.status != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("oversized headers: %d, want 431", r.status)
		}
	})
}

func TestListen(t *testing.T) {
	t.Run("OKTLS", func(t *testing.T) {
		cert, key, pool := testcert.Write(t)
		ln, err := pmhttp.Listen("127.0.0.1:0", cert, key)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		srv := &http.Server{ErrorLog: log.New(io.Discard, "", 0), // the refused TLS 1.1 handshake
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })}
		go srv.Serve(ln)
		for _, v := range []uint16{tls.VersionTLS11, tls.VersionTLS12} {
			cl := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: v, MaxVersion: v}}}
			resp, err := cl.Get("https://" + ln.Addr().String())
			if v < tls.VersionTLS12 {
				if err == nil {
					resp.Body.Close()
					t.Fatal("a TLS 1.1 client was served")
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != "hello" {
				t.Fatalf("got %q", b)
			}
		}
	})
	t.Run("ErrCertificate", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "missing.pem")
		if _, err := pmhttp.Listen("127.0.0.1:0", missing, missing); err == nil || !strings.HasPrefix(err.Error(), "TLS certificate: ") {
			t.Fatalf("got %v, want a TLS certificate error", err)
		}
	})
	t.Run("ErrBusyPort", func(t *testing.T) {
		ln, err := pmhttp.Listen("127.0.0.1:0", "", "")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		if ln2, err := pmhttp.Listen(ln.Addr().String(), "", ""); err == nil {
			ln2.Close()
			t.Fatal("listened twice on one port")
		}
	})
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.1.2.3:0": true, "[::1]:8080": true, "localhost:8080": true,
		"0.0.0.0:8080": false, ":8080": false, "[::]:8080": false, "10.0.0.1:8080": false, "example.com:80": false,
		"127.0.0.1": false, // no port: not an address to listen on
	} {
		if got := pmhttp.IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// A client given the CA of a server's self-signed certificate talks to it
// over TLS; one without is refused.
func TestClientRootCAs(t *testing.T) {
	cert, key, pool := testcert.Write(t)
	store := newStore(t, nil)
	ln, err := pmhttp.Listen("127.0.0.1:0", cert, key)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- pmhttp.NewServer(store, &pmhttp.ServerOptions{Logger: newTextLogger(io.Discard)}).Serve(ctx, ln, &pmhttp.ServeOptions{ShutdownTimeout: 10 * time.Second})
	}()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	url := "https://" + ln.Addr().String()
	if _, err := newClient(t, url, nil).Start(ctx); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without the CA: %v, want a certificate error", err)
	}
	if _, err := newClient(t, url, &pmhttp.ClientOptions{RootCAs: pool}).Start(ctx); err != nil {
		t.Fatalf("with the CA: %v", err)
	}
}
