package resp

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// multibulk is a command as clients send it.
func multibulk(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// pipeConn is a limitConn over one end of a net.Pipe, and the other end.
func pipeConn(t *testing.T, cmdTimeout time.Duration) (*limitConn, net.Conn) {
	t.Helper()
	server, client := net.Pipe()
	t.Cleanup(func() { server.Close(); client.Close() })
	return &limitConn{Conn: server, writeTimeout: time.Second, cmdTimeout: cmdTimeout}, client
}

// send writes s in pieces of n bytes from another goroutine, pausing
// between them, and closes the connection after.
func send(client net.Conn, s string, n int, pause time.Duration) {
	go func() {
		defer client.Close()
		for len(s) > 0 {
			k := min(n, len(s))
			if _, err := client.Write([]byte(s[:k])); err != nil {
				return
			}
			s = s[k:]
			time.Sleep(pause)
		}
	}()
}

// redcon is given a command only once it has come whole, however the
// client cuts it: redcon parses an unfinished command again from its start
// on every read, so a large command given in the pieces it came in would
// cost time quadratic in its size. A read that ends inside a command fills
// the reader's buffer (redcon's doubles as it fills, so a command whole
// takes a few reads).
func TestLimitConnGivesWholeCommands(t *testing.T) {
	c, client := pipeConn(t, 10*time.Second)
	sent := multibulk("PING") + multibulk("HSET", "a@x.io", "f", strings.Repeat("v", 1<<20)) +
		"PING\r\n" + multibulk("HGET", "a@x.io", "f") + multibulk("ECHO", strings.Repeat("e", 70_000))
	send(client, sent, 1000, 0)
	var got []byte
	buf := make([]byte, 16<<10)
	for reads := 0; ; reads++ {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		var f framer
		if f.scan(got); f.partial != 0 && n < len(buf) {
			t.Fatalf("read %d gave %d bytes, the last %d of them a command's unfinished start", reads, n, f.partial)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, []byte(sent)) {
		t.Fatalf("read %d bytes, sent %d", len(got), len(sent))
	}
}

// Framing redcon will refuse is given on at once, for it to answer with
// its protocol error, not held back for a command's end that never comes.
func TestLimitConnGivesLostFramingAtOnce(t *testing.T) {
	c, client := pipeConn(t, 10*time.Second)
	go client.Write([]byte("*2\r\n$3\r\nGET\r\nx"))
	buf := make([]byte, 100)
	var got []byte
	for !bytes.HasSuffix(got, []byte("x")) {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("after %q: %v", got, err)
		}
		got = append(got, buf[:n]...)
	}
}

// A client whose commands keep arriving is never cut off by the timeout
// for one command's arrival, even when no read ends between two commands
// (a long `redis-cli --pipe`); one that stops in the middle of a command
// is.
func TestLimitConnTimesOneCommandAtATime(t *testing.T) {
	const timeout = 300 * time.Millisecond
	c, client := pipeConn(t, timeout)
	// Commands of 101 bytes sent 25 at a time end with a read only every
	// 101 pieces, 0.5 s apart; a command comes every 20 ms.
	cmd := multibulk("HSET", "a@x.io", "f", strings.Repeat("v", 61))
	if len(cmd) != 101 {
		t.Fatalf("the command is %d bytes", len(cmd))
	}
	sent := strings.Repeat(cmd, 60)
	start := time.Now()
	send(client, sent, 25, 5*time.Millisecond)
	got, err := io.ReadAll(c)
	if err != nil || string(got) != sent {
		t.Fatalf("after %v, read %d of %d bytes: %v", time.Since(start), len(got), len(sent), err)
	}

	// Stalling in a command is cut off, also after a count with a sign
	// (which redcon takes), and also once the framing is lost, however
	// slowly the bytes keep coming: only a command that ends restarts the
	// clock.
	for name, start := range map[string]string{
		"Silent":      cmd[:20],
		"SignedCount": "*+1\r\n$4\r\nPING\r\n" + cmd[:20],
		"LostFraming": "*1\r\nxyz",
	} {
		c, client := pipeConn(t, timeout)
		go func() {
			defer client.Close()
			client.Write([]byte(start))
			for range 60 { // 3 s of a byte each 50 ms
				time.Sleep(50 * time.Millisecond)
				if _, err := client.Write([]byte("x")); err != nil {
					return
				}
			}
		}()
		_, err := io.Copy(io.Discard, struct{ io.Reader }{c})
		if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			t.Errorf("%s: a command begun and trickled: %v, want a timeout", name, err)
		}
	}
}
