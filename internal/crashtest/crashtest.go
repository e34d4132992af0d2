// Package crashtest kills a real `partmap serve` process at random moments
// while clients write, restarts it on the same data directory, and checks
// that nothing acknowledged was lost and nothing was half-applied.
//
// Each client owns a few emails and writes them one operation at a time, so
// the history of every email is a plain sequence that the model
// (internal/model) can replay. Emails of different clients share
// partitions, so the clients still meet each other's locks. When the server
// dies, each client's operation in flight may or may not have landed; after
// the restart the harness accepts exactly those two states and no other.
package crashtest

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
	"github.com/partmap/partmap/internal/model"
)

// Serve is how a run starts `partmap serve`.
type Serve struct {
	Binary string   // the partmap binary
	Data   string   // its data directory, unless Store is set
	Store  []string // serve's --store and its flags, instead of --data
}

// Config describes a run.
type Config struct {
	Serve
	Clients int // concurrent writers; at least 16 by the default
	Emails  int // per client
	Cycles  int // kill-and-restart cycles
	Seed    uint64
	Logf    func(format string, args ...any)
	// Resize starts a resize to another partition count at every cycle
	// that has none in progress, so that kills land in the middle of
	// resizes and restarts must resume them.
	Resize bool
	// Preload bulk-loads this many more profiles, which no client touches,
	// at the first cycle: with Resize, enough make a resize last longer
	// than a cycle.
	Preload int
}

// Result counts what a run checked.
type Result struct {
	Cycles       int
	Acknowledged int64 // writes acknowledged before some kill
	InFlight     int   // writes in flight at a kill
	Landed       int   // of those, how many turned out to have landed
	Verified     int   // profile checks after restarts
	Checked      int   // partition checks (counts and indexes) after restarts
	Resizes      int   // resizes started
	Resumed      int   // restarts that found a resize in progress
}

func (r Result) String() string {
	return fmt.Sprintf("%d kill cycles, %d acknowledged writes, %d profile checks and %d partition checks after restarts; "+
		"%d writes were in flight at a kill and %d of them had landed; %d resizes started, %d restarts resumed one",
		r.Cycles, r.Acknowledged, r.Verified, r.Checked, r.InFlight, r.Landed, r.Resizes, r.Resumed)
}

// key is the known state of one email: what the model says, and the
// operation in flight at the last kill, if any.
type key struct {
	state   partmap.Profile
	pending *model.Op
}

var addrRE = regexp.MustCompile(`msg=serving addr=(\S+)`)

// Run runs the harness. It returns an error describing the first violation.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg.Clients, cfg.Emails = cmp.Or(cfg.Clients, 16), cmp.Or(cfg.Emails, 3)
	cfg.Logf = orDiscard(cfg.Logf)
	rng := rand.New(rand.NewPCG(cfg.Seed, 7))
	// Emails of four partitions, dealt round-robin, so that every client
	// writes into partitions that other clients write too.
	groups := make([][]string, 4)
	for g := range groups {
		groups[g] = colliding(cfg.Clients*cfg.Emails, fmt.Sprintf("g%d-", g))
	}
	var emails [][]string
	for c := range cfg.Clients {
		var mine []string
		for i := range cfg.Emails {
			g := (c + i) % len(groups)
			mine = append(mine, groups[g][c*cfg.Emails+i])
		}
		emails = append(emails, mine)
	}
	keys := map[string]*key{}
	for _, mine := range emails {
		for _, e := range mine {
			keys[e] = &key{}
		}
	}
	var res Result
	for cycle := range cfg.Cycles {
		srv, cl, err := cfg.startCycle(ctx, cycle)
		if err != nil {
			return res, err
		}
		if cycle == 0 && cfg.Preload > 0 {
			if err := preload(ctx, cl, cfg.Preload); err != nil {
				srv.kill()
				return res, err
			}
		}
		if err := verify(ctx, cl, keys, cfg.Preload, &res); err != nil {
			srv.kill()
			return res, fmt.Errorf("cycle %d, after the restart: %w", cycle, err)
		}
		if cfg.Resize {
			if err := resize(ctx, cl, cycle, &res); err != nil {
				srv.kill()
				return res, fmt.Errorf("cycle %d: %w", cycle, err)
			}
		}

		// Write until a random moment, then kill the server mid-flight.
		var acked atomic.Int64
		ws := &workers{cycle: cycle}
		ws.start(cfg.Clients, rng, func(c int, r *rand.Rand) {
			cl, _ := pmhttp.NewClient(srv.url, nil)
			for {
				op := write(r, emails[c])
				ws.mu.Lock()
				k := keys[op.Email]
				ws.mu.Unlock()
				got, err := op.Do(ctx, cl)
				var answered *partmap.Error
				if err != nil && !errors.As(err, &answered) {
					// No answer at all: the server is gone. The write may or may
					// not have landed. (A 500 is an answer, and the model judges it.)
					ws.mu.Lock()
					k.pending = &op
					ws.mu.Unlock()
					return
				}
				next, want := op.Apply(k.state)
				if !want.Same(got) {
					ws.fail(fmt.Errorf("%v answered %v, but the model says %v", op, got, want))
					return
				}
				ws.mu.Lock()
				k.state = next
				ws.mu.Unlock()
				acked.Add(1)
			}
		})
		time.Sleep(time.Duration(20+rng.IntN(280)) * time.Millisecond)
		srv.kill()
		if err := ws.wait(); err != nil {
			return res, err
		}
		res.Acknowledged += acked.Load()
		res.Cycles++
		for _, k := range keys {
			if k.pending != nil {
				res.InFlight++
			}
		}
		cfg.Logf("cycle %d: killed after %d acknowledged writes", cycle, acked.Load())
	}
	// One last restart checks the writes of the last cycle.
	srv, err := start(ctx, cfg.Serve)
	if err != nil {
		return res, err
	}
	defer srv.kill()
	cl, _ := pmhttp.NewClient(srv.url, nil)
	if err := verify(ctx, cl, keys, cfg.Preload, &res); err != nil {
		return res, err
	}
	if !cfg.Resize {
		return res, nil
	}
	// Let the last resize finish, and check again on the final layout.
	for {
		st, err := cl.ResizeStatus(ctx)
		if err != nil {
			return res, err
		}
		if !st.Running {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return res, verify(ctx, cl, keys, cfg.Preload, &res)
}

// preload bulk-loads n profiles that no client writes.
func preload(ctx context.Context, cl *pmhttp.Client, n int) error {
	for i := 0; i < n; {
		batch := make([]partmap.Profile, 0, min(n-i, partmap.MaxBulkProfiles))
		for ; i < n && len(batch) < cap(batch); i++ {
			batch = append(batch, partmap.Profile{partmap.FieldEmail: fmt.Sprintf("preload%d@crash.test", i), "a": "1", "n": fmt.Sprint(i % 10)})
		}
		res, err := cl.UpsertProfiles(ctx, batch)
		if err != nil {
			return fmt.Errorf("preload: %w", err)
		}
		for _, r := range res {
			if r.Err != nil {
				return fmt.Errorf("preload: %w", r.Err)
			}
		}
	}
	return nil
}

// resizeCounts are the partition counts the harness resizes to in turn.
var resizeCounts = []int{997, 1500, 64, 1000}

// resize starts the next resize unless a restart resumed one.
func resize(ctx context.Context, cl *pmhttp.Client, cycle int, res *Result) error {
	st, err := cl.ResizeStatus(ctx)
	if err != nil {
		return err
	}
	if st.Running {
		res.Resumed++
		return nil
	}
	to := resizeCounts[cycle%len(resizeCounts)]
	if to == st.Partitions {
		to++
	}
	if _, err := cl.Resize(ctx, to); err != nil {
		return fmt.Errorf("resize to %d: %w", to, err)
	}
	res.Resizes++
	return nil
}

// write draws a write (no reads: they cannot be lost) on one of emails.
func write(r *rand.Rand, emails []string) model.Op {
	for {
		if op := model.Random(r, emails); op.Kind != model.Get {
			return op
		}
	}
}

// verify reads every email after a restart. Each must be in its known
// state, or, if a write was in flight at the kill, in the state that write
// would have produced; the one found becomes the known state. The profile
// count must match too, so nothing appeared that nobody wrote.
func verify(ctx context.Context, cl *pmhttp.Client, keys map[string]*key, preloaded int, res *Result) error {
	live := int64(0)
	for email, k := range keys {
		rec, err := cl.FindProfile(ctx, email)
		var got partmap.Profile
		switch {
		case errors.Is(err, partmap.ErrNotFound):
		case err != nil:
			return err
		default:
			got = rec.Profile
		}
		res.Verified++
		switch {
		case model.Equal(got, k.state):
		case k.pending != nil && landed(*k.pending, k.state, got):
			res.Landed++
			k.state = got
		default:
			msg := fmt.Sprintf("%s is %s; acknowledged writes left it %s", email, model.Describe(got), model.Describe(k.state))
			if k.pending != nil {
				msg += fmt.Sprintf(", and %v was in flight", *k.pending)
			}
			return errors.New(msg)
		}
		k.pending = nil
		if got != nil {
			live++
		}
	}
	stats, err := cl.ListPartitions(ctx)
	if err != nil {
		return err
	}
	if stats.TotalProfiles != live+int64(preloaded) {
		return fmt.Errorf("the directory holds %d profiles, but %d were written and %d preloaded", stats.TotalProfiles, live, preloaded)
	}
	// Every partition's count and index entries agree with its profiles: a
	// kill never leaves a write half-indexed.
	for try := 0; ; try++ {
		checked := 0
		err := cl.CheckPartitions(ctx, 0, 0, func(c partmap.PartitionCheck) error {
			if !c.OK() {
				return fmt.Errorf("check of %s found drift: %+v", c.Partition, c)
			}
			checked++
			return nil
		})
		if err == nil {
			res.Checked = checked
			break
		}
		// A resize resumed by the restart may switch layouts meanwhile:
		// check the new one from the start.
		if partmap.ErrorCode(err) != partmap.ECONFLICT || try == 10 {
			return fmt.Errorf("check: %w", err)
		}
	}
	if stats.TotalPartitions == 0 {
		return fmt.Errorf("the server did not say how many partitions it has")
	}
	return nil
}

// colliding returns n emails with the prefix that share one partition.
func colliding(n int, prefix string) []string {
	var out []string
	var want partmap.Partition
	for i := 0; len(out) < n; i++ {
		e := fmt.Sprintf("%s%d@crash.test", prefix, i)
		p := partmap.PartitionOf(e, partmap.DefaultPartitions)
		if len(out) == 0 {
			want = p
		}
		if p == want {
			out = append(out, e)
		}
	}
	return out
}

func landed(op model.Op, before, got partmap.Profile) bool {
	after, _ := op.Apply(before)
	return model.Equal(after, got)
}

// orDiscard is logf, or a function that logs nothing when logf is nil.
func orDiscard(logf func(format string, args ...any)) func(format string, args ...any) {
	if logf == nil {
		return func(string, ...any) {}
	}
	return logf
}

// workers are a cycle's goroutines, each with a random source of its own.
type workers struct {
	cycle int
	wg    sync.WaitGroup
	mu    sync.Mutex // guards err, and what the workers share
	err   error      // the first violation
}

// start runs work in n goroutines, the w-th with a source seeded from rng.
func (ws *workers) start(n int, rng *rand.Rand, work func(w int, r *rand.Rand)) {
	for w := range n {
		seed := rng.Uint64()
		ws.wg.Go(func() { work(w, rand.New(rand.NewPCG(seed, uint64(w)))) })
	}
}

// fail reports a violation; the first one is the cycle's.
func (ws *workers) fail(err error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.err == nil {
		ws.err = fmt.Errorf("cycle %d: %w", ws.cycle, err)
	}
}

// wait waits for every worker to return, and returns the first violation.
func (ws *workers) wait() error {
	ws.wg.Wait()
	return ws.err
}

type server struct {
	cmd *exec.Cmd
	url string
}

// startCycle starts the server of a cycle, and the directory through a
// client of it.
func (s Serve) startCycle(ctx context.Context, cycle int) (*server, *pmhttp.Client, error) {
	srv, err := start(ctx, s)
	if err != nil {
		return nil, nil, fmt.Errorf("cycle %d: %w", cycle, err)
	}
	cl, err := pmhttp.NewClient(srv.url, nil)
	if err != nil {
		srv.kill()
		return nil, nil, err
	}
	if _, err := cl.Start(ctx); err != nil {
		srv.kill()
		return nil, nil, fmt.Errorf("cycle %d: start: %w", cycle, err)
	}
	return srv, cl, nil
}

func start(ctx context.Context, cfg Serve) (*server, error) {
	// The model writes the fields a and n: indexing them makes every write
	// maintain index entries, which the check after each restart verifies.
	args := []string{"serve", "--addr", "127.0.0.1:0", "--lock-wait", "10ms", "--index", "a,n"}
	if cfg.Store != nil {
		args = append(args, cfg.Store...)
	} else {
		args = append(args, "--data", cfg.Data)
	}
	cmd := exec.CommandContext(ctx, cfg.Binary, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	found := make(chan string, 1)
	var mu sync.Mutex
	var log []string
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
			mu.Lock()
			log = append(log, sc.Text())
			mu.Unlock()
		}
		io.Copy(io.Discard, stderr)
		close(found)
	}()
	select {
	case url, ok := <-found:
		if ok {
			return &server{cmd: cmd, url: url}, nil
		}
	case <-time.After(30 * time.Second):
	}
	cmd.Process.Kill()
	cmd.Wait()
	mu.Lock()
	defer mu.Unlock()
	return nil, fmt.Errorf("partmap serve did not start: %q", log)
}

// kill sends SIGKILL and reaps the process.
func (s *server) kill() {
	s.cmd.Process.Kill()
	s.cmd.Wait()
}
