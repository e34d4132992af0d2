package redis_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// monitor counts, as MONITOR shows them, the commands clients send a
// Redis node, leaving out the markers and INFO it sends itself, the
// commands scripts run and, with a filter, the lines it rejects. It speaks
// RESP itself on a connection of its own: MONITOR answers with one status
// line per command.
type monitor struct {
	t      *testing.T
	c      *goredis.Client // sends the markers, on the node monitored
	lines  chan string
	filter func(string) bool
	seq    int
}

func startMonitor(t *testing.T, network, addr string, marker *goredis.Client, filter func(string) bool) *monitor {
	t.Helper()
	conn, err := net.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	m := &monitor{t: t, c: marker, lines: make(chan string, 1<<16), filter: filter}
	go func() {
		r := bufio.NewReader(conn)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				close(m.lines)
				return
			}
			m.lines <- line
		}
	}()
	t.Cleanup(func() { conn.Close() })
	m.count() // MONITOR has started once its first marker shows
	return m
}

// count returns how many commands were sent since the last count.
func (m *monitor) count() int {
	m.t.Helper()
	n, _ := m.countBy()
	return n
}

// countBy returns how many commands were sent since the last count, in
// all and by command name. It sends a marker and reads up to it.
func (m *monitor) countBy() (int, map[string]int) {
	m.t.Helper()
	m.seq++
	marker := fmt.Sprintf("partmap-marker-%d", m.seq)
	n, by := 0, map[string]int{}
	for deadline := time.After(30 * time.Second); ; {
		if err := m.c.Echo(context.Background(), marker).Err(); err != nil {
			m.t.Fatal(err)
		}
		for {
			select {
			case line, ok := <-m.lines:
				if !ok {
					m.t.Fatal("the MONITOR connection closed")
				}
				if strings.Contains(line, marker) {
					return n, by
				}
				if strings.Contains(line, "partmap-marker-") || strings.Contains(line, " lua]") || strings.Contains(line, `] "info"`) ||
					(m.filter != nil && !m.filter(line)) {
					continue
				}
				n++
				// +1700000000.000000 [0 unix:/path] "zrangebylex" ...
				if _, rest, ok := strings.Cut(line, "] \""); ok {
					name, _, _ := strings.Cut(rest, "\"")
					by[strings.ToLower(name)]++
				}
				continue
			case <-deadline:
				m.t.Fatalf("MONITOR never showed %s", marker)
			case <-time.After(100 * time.Millisecond):
			}
			break // not shown yet (MONITOR was starting): mark again
		}
	}
}
