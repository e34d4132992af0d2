package resp_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/prometheus/client_golang/prometheus"
	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/resp"
)

// commits is how many commits the store has made, from its
// partmap_store_commit_seconds histogram.
func commits(t *testing.T, store partmap.Store) uint64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	for _, c := range store.(interface{ Collectors() []prometheus.Collector }).Collectors() {
		reg.MustRegister(c)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64 // none before the first commit
	for _, f := range families {
		if f.GetName() == "partmap_store_commit_seconds" {
			for _, m := range f.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

// A pipeline's writes commit together, yet each command answers as it
// would alone, as Redis's does: a failure in its place, writes of one key
// in the order sent, reads seeing the writes before them, QUIT dropping
// the rest. Every write keeps its own change feed event.
func TestPipelineMatchesRedis(t *testing.T) {
	addr, store := serve(t, nil)
	ctx := context.Background()
	pm, rd := client(t, addr, 2), redisClient(t, 11, 2)
	pm.Options().PoolSize, rd.Options().PoolSize = 1, 1
	feed := store.(partmap.Feeder)
	mark, err := feed.Changes(ctx, partmap.ChangeQuery{After: partmap.FeedNow})
	if err != nil {
		t.Fatal(err)
	}
	script := [][]any{
		{"hset", "a@x.io", "f", "1"}, {"hset", "b@x.io", "f", "1", "g", "2"}, {"hincrby", "a@x.io", "f", "5"},
		{"hset", "c@x.io", "f", "x"}, {"hincrby", "c@x.io", "f", "1"}, // not an integer: its error, in its place
		{"hsetnx", "d@x.io", "f", "1"}, {"hsetnx", "d@x.io", "f", "2"}, {"hget", "a@x.io", "f"},
		{"hdel", "b@x.io", "g"}, {"hdel", "b@x.io", "f"}, {"exists", "b@x.io"}, {"hincrby", "e@x.io", "n", "-3"},
		{"hset", "e@x.io"}, // wrong arity: refused in its place
		{"del", "d@x.io"}, {"hlen", "a@x.io"}, {"hset", "a@x.io", "g", "v"}, {"hgetall", "a@x.io"},
	}
	run := func(c *goredis.Client) []reply {
		cmds, _ := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for _, args := range script {
				p.Do(ctx, args...)
			}
			return nil
		})
		out := make([]reply, len(cmds))
		for i, cmd := range cmds {
			v, err := cmd.(*goredis.Cmd).Result()
			out[i] = reply{val: v}
			if err != nil && err != goredis.Nil {
				out[i].err = err.Error()
			}
		}
		return out
	}
	got, want := run(pm), run(rd)
	for i := range script {
		g, w := unordered(fmt.Sprint(script[i][0]), got[i]), unordered(fmt.Sprint(script[i][0]), want[i])
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%q: partmap %#v, redis %#v", script[i], g, w)
		}
	}
	page, err := feed.Changes(ctx, partmap.ChangeQuery{After: mark.Next})
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	for _, ch := range page.Changes {
		events = append(events, ch.Email+" "+string(ch.Op))
	}
	wantEvents := []string{"a@x.io setFields", "b@x.io setFields", "a@x.io increment", "c@x.io setFields",
		"d@x.io setIfAbsent", "b@x.io getDelete", "b@x.io getDelete", "e@x.io increment", "d@x.io delete", "a@x.io setFields"}
	if !reflect.DeepEqual(events, wantEvents) {
		t.Errorf("events\n%q, want\n%q", events, wantEvents)
	}
	// Sixteen writes of sixteen profiles in one pipeline are one commit
	// (two, should the pipeline reach the server in two reads).
	before := commits(t, store)
	if _, err := pm.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i := range 16 {
			p.HSet(ctx, fmt.Sprintf("g%d@x.io", i), "f", i)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n := commits(t, store) - before; n > 2 {
		t.Errorf("a pipeline of 16 writes took %d commits", n)
	}
	// QUIT drops what follows it (over a socket: go-redis retries a
	// pipeline that meets the end of the connection).
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("HSET q1@x.io f 1\r\nQUIT\r\nHSET q2@x.io f 1\r\n")); err != nil {
		t.Fatal(err)
	}
	if all, err := io.ReadAll(conn); err != nil || string(all) != ":1\r\n+OK\r\n" {
		t.Fatalf("the pipeline with QUIT: %q %v", all, err)
	}
	if n, err := pm.Exists(ctx, "q1@x.io", "q2@x.io").Result(); err != nil || n != 1 {
		t.Fatalf("after QUIT: %d of the two keys exist (%v), want the first alone", n, err)
	}
}

// Clients that pipeline reads, writes and increments of a few keys see a
// linearizable history: each command is an operation from its
// pipeline's send to its reply (porcupine orders a pipeline's commands
// freely; TestPipelineMatchesRedis holds their order).
func TestPipelinesAreLinearizable(t *testing.T) {
	addr, _ := serve(t, nil)
	ctx := context.Background()
	type input struct {
		op, key string
		n       int64
	}
	type output struct {
		n      int64 // HSET's new fields, HINCRBY's value, HGET's value, DEL's count
		exists bool  // HGET's: the field exists
		err    bool
	}
	type state struct {
		exists bool
		n      int64
	}
	keys := []string{"l0@x.io", "l1@x.io", "l2@x.io", "l3@x.io"}
	start := time.Now()
	var mu sync.Mutex
	var history []porcupine.Operation
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Go(func() {
			cl := client(t, addr, 2)
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			for range 40 {
				var ins []input
				for range 1 + rng.IntN(8) {
					in := input{op: []string{"set", "get", "incr", "del"}[rng.IntN(4)], key: keys[rng.IntN(len(keys))], n: rng.Int64N(100)}
					ins = append(ins, in)
				}
				call := time.Since(start).Nanoseconds()
				cmds, _ := cl.Pipelined(ctx, func(p goredis.Pipeliner) error {
					for _, in := range ins {
						switch in.op {
						case "set":
							p.HSet(ctx, in.key, "v", in.n)
						case "get":
							p.HGet(ctx, in.key, "v")
						case "incr":
							p.HIncrBy(ctx, in.key, "v", in.n)
						case "del":
							p.Del(ctx, in.key)
						}
					}
					return nil
				})
				ret := time.Since(start).Nanoseconds()
				mu.Lock()
				for i, cmd := range cmds {
					var out output
					switch cmd := cmd.(type) {
					case *goredis.IntCmd:
						out.n, out.err = cmd.Val(), cmd.Err() != nil
					case *goredis.StringCmd:
						switch v, err := cmd.Result(); {
						case err == goredis.Nil:
						case err != nil:
							out.err = true
						default:
							out.exists = true
							out.n, _ = strconv.ParseInt(v, 10, 64)
						}
					}
					history = append(history, porcupine.Operation{ClientId: c, Input: ins[i], Output: out, Call: call, Return: ret})
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	model := porcupine.Model{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			byKey := map[string][]porcupine.Operation{}
			for _, op := range h {
				k := op.Input.(input).key
				byKey[k] = append(byKey[k], op)
			}
			var out [][]porcupine.Operation
			for _, ops := range byKey {
				out = append(out, ops)
			}
			return out
		},
		Init: func() any { return state{} },
		Step: func(st, in, out any) (bool, any) {
			s, i, o := st.(state), in.(input), out.(output)
			if o.err {
				return false, s
			}
			switch i.op {
			case "set":
				return o.n == map[bool]int64{false: 1, true: 0}[s.exists], state{exists: true, n: i.n}
			case "get":
				return o.exists == s.exists && (!s.exists || o.n == s.n), s
			case "incr":
				next := s.n + i.n
				if !s.exists {
					next = i.n
				}
				return o.n == next, state{exists: true, n: next}
			default: // del
				return o.n == map[bool]int64{false: 0, true: 1}[s.exists], state{}
			}
		},
		DescribeOperation: func(in, out any) string { return fmt.Sprintf("%v → %v", in, out) },
	}
	if res, _ := porcupine.CheckOperationsVerbose(model, history, 30*time.Second); res != porcupine.Ok {
		t.Fatalf("a history of %d pipelined commands is %v", len(history), res)
	}
}

// groupFailing is a store whose transactions of several operations (a
// pipeline's groups) fail with err, and that counts single writes.
type groupFailing struct {
	partmap.Store
	err     error
	applied atomic.Int64
}

func (s *groupFailing) Transact(ctx context.Context, ops []partmap.Operation) ([]partmap.OperationResult, error) {
	if len(ops) > 1 {
		return nil, s.err
	}
	return s.Store.Transact(ctx, ops)
}

func (s *groupFailing) Apply(ctx context.Context, op partmap.Operation) (partmap.OperationResult, error) {
	s.applied.Add(1)
	return s.Store.Apply(ctx, op)
}

// A group that meets a lock conflict wrote nothing: its commands run
// again one by one. One that fails otherwise may have committed: each
// command answers the failure, and none runs again.
func TestPipelineGroupFailures(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		err     error
		applied int64
		reply   string
	}{
		{&partmap.Error{Code: partmap.ELOCKCONFLICT, Message: "held"}, 3, ""},
		{&partmap.Error{Code: partmap.EUNAVAILABLE, Message: "the store did not answer"}, 0, "LOADING the store did not answer"},
	} {
		t.Run(string(partmap.ErrorCode(tc.err)), func(t *testing.T) {
			_, store := serve(t, nil)
			fs := &groupFailing{Store: store, err: tc.err}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			srv := resp.New(fs, nil)
			go srv.Serve(ln)
			t.Cleanup(func() { srv.Close() })
			c := client(t, ln.Addr().String(), 2)
			cmds, _ := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
				for _, k := range []string{"a@x.io", "b@x.io", "c@x.io"} {
					p.HIncrBy(ctx, k, "n", 2)
				}
				return nil
			})
			for i, cmd := range cmds {
				v, err := cmd.(*goredis.IntCmd).Result()
				switch {
				case tc.reply == "" && (err != nil || v != 2):
					t.Errorf("command %d: %d %v, want 2", i, v, err)
				case tc.reply != "" && (err == nil || err.Error() != tc.reply):
					t.Errorf("command %d: %d %v, want %q", i, v, err, tc.reply)
				}
			}
			if n := fs.applied.Load(); n != tc.applied {
				t.Errorf("%d commands ran alone, want %d", n, tc.applied)
			}
		})
	}
}
