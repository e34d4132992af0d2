package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A client that never finishes its headers is disconnected after
// --read-header-timeout, and oversized headers are refused.
func TestSlowAndOversizedHeaders(t *testing.T) {
	url, _ := serveInProcess(t, "--read-header-timeout", "200ms", "--idle-timeout", "200ms")
	addr := strings.TrimPrefix(url, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET /patterns/hash-partitioned-attribute-map/partitions HTTP/1.1\r\nHost: x\r\n") // and never the blank line
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))                                                  // a safety net, not a measurement
	if _, err := io.ReadAll(conn); err != nil {
		t.Fatalf("the server kept a header-less connection open: %v", err)
	}

	conn2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	io.WriteString(conn2, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", 200<<10)+"\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn2), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("200 KiB of headers: %d, want 431", resp.StatusCode)
	}
}
