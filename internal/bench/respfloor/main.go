// Command respfloor is the least a durable Redis-protocol server in Go can
// do per HSET and HGET, for respbench --floor to measure beside partmap and
// Redis: what any server of a given shape on a given store could reach at
// best.
//
//	respfloor --addr 127.0.0.1:6390 --dir DIR --store pebble|log|loop|loop-pebble
//
// Each acknowledges a write only once it is fsync'd, shares fsyncs among
// concurrent writers, and writes a connection's whole pipeline at once. It
// keeps nothing partmap keeps besides the value: no record format,
// partition, lock, version, index entry, change-feed event, count or
// metric, and no check of its arguments beyond their number.
//
// Two servers: redcon's, a goroutine per client as partmap has, and an
// event loop in the manner of Redis (loop_linux.go), one thread serving every
// client, that runs all the commands ready, syncs once and then replies.
//
//   - pebble: redcon; HSET is one Pebble Set of key+field under Sync (a
//     pipeline is one batch), HGET one Pebble Get. Pebble is tuned as
//     partmap's embedded store tunes it.
//   - log: redcon; Redis's design, a Go map in memory and an append-only
//     log, which one goroutine writes and fdatasyncs as writes gather, the
//     next batch gathering while the last one syncs.
//   - loop: the event loop on the map and the log: Redis in Go.
//   - loop-pebble: the event loop on Pebble, a loop turn's writes one
//     batch committed under Sync.
//
// It is not partmap and never will be: it exists so that a speed target
// can be checked against what the protocol library, the language, the
// server's shape and the storage engine cost before anything of
// partmap's own.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"strings"

	"github.com/tidwall/redcon"
)

// store is what the floor server keeps values in.
type store interface {
	// set writes every (key, field, value) triple durably and returns how
	// many fields were new, where the store can tell cheaply (else 0).
	set(triples [][3][]byte) ([]int, error)
	get(key, field []byte) ([]byte, bool, error)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:6390", "address to serve the Redis protocol on")
	dir := flag.String("dir", "", "directory for the store's files (required)")
	kind := flag.String("store", "pebble", "store: pebble, log, loop or loop-pebble")
	flag.Parse()
	if *dir == "" {
		log.Fatal("respfloor: --dir is required")
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatalf("respfloor: %v", err)
	}
	log.Fatalf("respfloor: %v", serve(ln, *kind, *dir))
}

// serve serves ln with the server and store kind names, in dir.
func serve(ln net.Listener, kind, dir string) error {
	var s store      // served by redcon
	var st loopStore // served by the event loop
	var err error
	switch kind {
	case "pebble":
		s, err = openPebble(dir)
	case "log":
		s, err = openLog(dir)
	case "loop":
		st, err = openLoopLog(dir)
	case "loop-pebble":
		st, err = openLoopPebble(dir)
	default:
		return fmt.Errorf("unknown --store %q (pebble, log, loop or loop-pebble)", kind)
	}
	if err != nil {
		return err
	}
	if st != nil {
		return serveLoop(ln, st)
	}
	return redcon.Serve(ln, func(conn redcon.Conn, cmd redcon.Command) { handle(s, conn, cmd) }, nil, nil)
}

func handle(s store, conn redcon.Conn, cmd redcon.Command) {
	if !strings.EqualFold(string(cmd.Args[0]), "HSET") {
		handleOne(s, conn, cmd)
		return
	}
	// The pipeline's HSETs that follow go into the same write.
	cmds := append([]redcon.Command{cmd}, conn.ReadPipeline()...)
	for len(cmds) > 0 {
		n := 0
		for n < len(cmds) && strings.EqualFold(string(cmds[n].Args[0]), "HSET") && len(cmds[n].Args) == 4 {
			n++
		}
		if n == 0 {
			handleOne(s, conn, cmds[0])
			cmds = cmds[1:]
			continue
		}
		triples := make([][3][]byte, n)
		for i, c := range cmds[:n] {
			triples[i] = [3][]byte{c.Args[1], c.Args[2], c.Args[3]}
		}
		added, err := s.set(triples)
		for i := range n {
			if err != nil {
				conn.WriteError("ERR " + err.Error())
			} else {
				conn.WriteInt(added[i])
			}
		}
		cmds = cmds[n:]
	}
}

func handleOne(s store, conn redcon.Conn, cmd redcon.Command) {
	switch name := string(cmd.Args[0]); {
	case strings.EqualFold(name, "HSET"):
		conn.WriteError("ERR wrong number of arguments for 'hset' command")
	case strings.EqualFold(name, "HGET"):
		if len(cmd.Args) != 3 {
			conn.WriteError("ERR wrong number of arguments for 'hget' command")
			return
		}
		v, ok, err := s.get(cmd.Args[1], cmd.Args[2])
		switch {
		case err != nil:
			conn.WriteError("ERR " + err.Error())
		case !ok:
			conn.WriteNull()
		default:
			conn.WriteBulk(v)
		}
	case strings.EqualFold(name, "PING"):
		conn.WriteString("PONG")
	case strings.EqualFold(name, "CONFIG"):
		conn.WriteArray(0) // redis-benchmark asks; nothing to tell
	default:
		conn.WriteError("ERR unknown command '" + name + "'")
	}
}
