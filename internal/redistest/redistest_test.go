package redistest

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A node whose port another process took between the pick and its bind
// exits; it is started again on other ports, and never mistaken for the
// process that holds the port.
func TestNodeOnATakenPort(t *testing.T) {
	taken, err := freeClusterPort()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(taken)))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	picks := 0
	pickClusterPort = func() (int, error) {
		if picks++; picks == 1 {
			return taken, nil
		}
		return freeClusterPort()
	}
	defer func() { pickClusterPort = freeClusterPort }()
	addr, n, err := startNode(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer n.kill()
	if picks != 2 || strings.HasSuffix(addr, ":"+strconv.Itoa(taken)) {
		t.Fatalf("the node listens on %s after %d picks; want a second pick, not port %d", addr, picks, taken)
	}
}
