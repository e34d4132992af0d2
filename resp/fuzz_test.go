package resp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/redcon"

	"github.com/partmap/partmap/pebble"
)

// FuzzCommands runs arbitrary commands, named from the table or not, with
// arbitrary arguments, through the command layer on a real store: none
// panics, each answers exactly one well-formed reply, and the store still
// answers afterwards.
func FuzzCommands(f *testing.F) {
	for _, seed := range []string{
		"hset\x00a@x.io\x00f\x00v", "hincrby\x00a@x.io\x00f\x001", "hincrbyfloat\x00a@x.io\x00f\x001.5e3",
		"hexpire\x00a@x.io\x00100\x00nx\x00fields\x001\x00f", "hgetex\x00a@x.io\x00px\x0010\x00fields\x001\x00f",
		"hsetex\x00a@x.io\x00fxx\x00keepttl\x00fields\x001\x00f\x00v", "scan\x000\x00match\x00[a-\x00count\x003",
		"hello\x003\x00setname\x00x", "expire\x00a@x.io\x00-5\x00xx\x00lt", "hrandfield\x00a@x.io\x00-3\x00withvalues",
		"partmap.search\x000\x00companyName\x00x", "del\x00a@x.io\x00\xff", "command\x00info\x00hset",
		"ft.create\x00idx\x00on\x00hash\x00stopwords\x000\x00schema\x00f\x00text\x00nostem\x00sortable\x00t\x00tag\x00separator\x00;\x00n\x00numeric",
		"ft.search\x00idx\x00@t:{a|b} -f:pre* @n:[(1 +inf]\x00return\x002\x00f\x00n\x00sortby\x00n\x00desc\x00limit\x000\x005",
		"ft.search\x00profiles\x00*\x00nocontent\x00limit\x000\x000", "ft.info\x00idx", "ft._list", "ft.dropindex\x00idx\x00dd",
	} {
		f.Add([]byte(seed))
	}
	store, err := pebble.Open(f.TempDir(), nil)
	if err != nil {
		f.Fatal(err)
	}
	defer store.Close()
	if _, err := store.Start(context.Background()); err != nil {
		f.Fatal(err)
	}
	s := New(store, nil)
	names := slices.Sorted(maps.Keys(commands))
	f.Fuzz(func(t *testing.T, input []byte) {
		args := bytes.Split(input, []byte{0})
		if len(args[0]) == 1 { // one byte names a command of the table
			args[0] = []byte(strings.ToUpper(names[int(args[0][0])%len(names)]))
		}
		if lower(args[0]) == "quit" {
			return
		}
		conn := &bufConn{}
		conn.Writer = redcon.NewWriter(&conn.out)
		if !s.accept(conn) {
			t.Fatal("refused")
		}
		s.handle(conn, redcon.Command{Args: args})
		s.hangUp(conn, nil)
		if err := conn.Flush(); err != nil {
			t.Fatal(err)
		}
		out := conn.out.Bytes()
		if len(out) == 0 || !strings.ContainsRune("+-:$*%_,", rune(out[0])) || !bytes.HasSuffix(out, []byte("\r\n")) {
			t.Fatalf("%q answered %q", args, out)
		}
		if _, err := store.ListPartitions(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// bufConn is a redcon.Conn whose replies go to a buffer.
type bufConn struct {
	*redcon.Writer
	out bytes.Buffer
	ctx any
}

func (c *bufConn) RemoteAddr() string { return "fuzz" }
func (c *bufConn) Close() error {
	return errors.New("resp: the fuzzed command tried to close the connection")
}
func (c *bufConn) Context() any                        { return c.ctx }
func (c *bufConn) SetContext(v any)                    { c.ctx = v }
func (c *bufConn) SetReadBuffer(int)                   {}
func (c *bufConn) Detach() redcon.DetachedConn         { return nil }
func (c *bufConn) ReadPipeline() []redcon.Command      { return nil }
func (c *bufConn) PeekPipeline() []redcon.Command      { return nil }
func (c *bufConn) NetConn() net.Conn                   { return nil }
func (c *bufConn) WriteBulkFrom(n int64, rb io.Reader) { c.Writer.WriteBulkFrom(n, rb) }
