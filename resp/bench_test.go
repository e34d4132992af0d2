package resp_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"testing"

	"github.com/partmap/partmap"
)

// BenchmarkHGet is one client's HGETs, a pipeline of 64 at a time, from a
// raw socket so that the client allocates nothing: allocs/op is the
// server's, per command. The process's CPU includes the client's; for the
// server's alone, see internal/bench/respbench.
func BenchmarkHGet(b *testing.B) {
	addr, store := serve(b, nil)
	if _, _, err := partmap.UpsertProfile(context.Background(), store, partmap.Profile{"emailAddress": "b@x.io", "fullName": "B"}, partmap.Condition{}); err != nil {
		b.Fatal(err)
	}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	const depth = 64
	cmd := []byte("*3\r\n$4\r\nHGET\r\n$6\r\nb@x.io\r\n$8\r\nfullName\r\n")
	var batch []byte
	for range depth {
		batch = append(batch, cmd...)
	}
	reply := []byte("$1\r\nB\r\n")
	got := make([]byte, depth*len(reply))
	rd := bufio.NewReaderSize(conn, len(got))
	b.ReportAllocs()
	for n := 0; n < b.N; n += depth {
		if _, err := conn.Write(batch); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(rd, got); err != nil {
			b.Fatal(err)
		}
		if string(got[:len(reply)]) != string(reply) {
			b.Fatalf("reply %q", got[:len(reply)])
		}
	}
}
