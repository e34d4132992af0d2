package crashtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/model"
)

// The expiry scenario kills a process that writes deadlines a few hundred
// milliseconds ahead, so that deadlines fall before, during and after each
// kill and restart. Its writer is a child process that holds the store
// itself (the HTTP API has no expiry routes yet): its clients tell the
// parent on stdout what they are about to do and what they were answered,
// and a line written before the SIGKILL reaches the parent all the same.

// ExpiryClients and ExpiryEmails size the child's load: each client owns
// its emails and writes them one operation at a time.
const (
	ExpiryClients = 8
	ExpiryEmails  = 3
)

// line is one report of a child's client: Begin before an operation,
// then its answer, with the clock before and after it.
type line struct {
	Client int
	Begin  bool
	Op     partmap.Operation
	T0, T1 int64
	Got    model.ExpiryResult
}

func expiryEmails(client int) []string {
	var out []string
	for i := range ExpiryEmails {
		out = append(out, fmt.Sprintf("c%d-e%d@expiry.test", client, i))
	}
	return out
}

// ExpiryChild writes until it is killed: ExpiryClients clients, each on
// its own emails, put, patch, increment, delete, set fields with and
// without deadlines, and set and remove profile and field deadlines, all
// 100 to 700 ms ahead of the clock. Every step is reported to out.
func ExpiryChild(ctx context.Context, s partmap.Store, out io.Writer, seed uint64) error {
	if _, err := s.Start(ctx); err != nil {
		return err
	}
	var mu sync.Mutex
	report := func(l line) {
		b, _ := json.Marshal(l)
		mu.Lock()
		defer mu.Unlock()
		out.Write(append(b, '\n')) // one write: a line reaches the parent whole or not at all
	}
	var wg sync.WaitGroup
	for c := range ExpiryClients {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(c)))
			emails := expiryEmails(c)
			for ctx.Err() == nil {
				op := expiryOp(r, emails[r.IntN(len(emails))])
				t0 := time.Now().UnixMilli()
				report(line{Client: c, Begin: true, Op: op, T0: t0})
				res, err := s.Apply(ctx, op)
				report(line{Client: c, Op: op, T0: t0, T1: time.Now().UnixMilli(), Got: model.FromOperation(res, err)})
			}
		})
	}
	wg.Wait()
	return ctx.Err()
}

func expiryOp(r *rand.Rand, email string) partmap.Operation {
	ahead := func() partmap.When {
		return partmap.At(time.Now().Add(time.Duration(100+r.IntN(600)) * time.Millisecond))
	}
	v := func() *string { s := fmt.Sprint(r.IntN(4)); return &s }
	op := partmap.Operation{Email: email}
	switch r.IntN(10) {
	case 0:
		op.Op, op.Email, op.Profile = partmap.OpPut, "", partmap.Profile{partmap.FieldEmail: email, "a": *v(), "n": *v()}
	case 1:
		op.Op, op.Patch = partmap.OpPatch, partmap.Patch{"b": v()}
	case 2:
		op.Op, op.Field, op.By = partmap.OpIncrement, "n", 1
	case 3:
		op.Op = partmap.OpDelete
	case 4, 5:
		w := ahead()
		op.Op, op.Set, op.Expiry.When = partmap.OpSetFields, partmap.Patch{"a": v()}, &w
	case 6:
		op.Op, op.Set = partmap.OpSetFields, partmap.Patch{"b": v()}
	case 7:
		op.Op, op.When = partmap.OpExpire, ahead()
	case 8:
		op.Op, op.When, op.Fields = partmap.OpExpire, ahead(), []string{[]string{"a", "b", "n"}[r.IntN(3)]}
	default:
		op.Op = partmap.OpPersist
	}
	return op
}

// ExpiryConfig describes a run of the expiry scenario.
type ExpiryConfig struct {
	Cycles int
	Seed   uint64
	// Open opens the store at where, with the given clock (nil: the real
	// one) and a sweeper every sweep: between cycles in the test, and in
	// the writer of each cycle, the test binary run again, whose TestMain
	// calls ExpiryChildMain with the same Open.
	Open  ExpiryOpener
	Where string
	Logf  func(format string, args ...any)
}

// ExpiryOpener opens the store of an expiry run; see ExpiryConfig.
type ExpiryOpener func(where string, clock func() time.Time, sweep time.Duration) (ExpiryStore, error)

// ExpiryStore is a store that the run closes.
type ExpiryStore interface {
	partmap.Store
	Close() error
}

// expiryChildEnv holds the seed and the store's where of a writer that
// RunExpiry kills.
const expiryChildEnv = "PARTMAP_EXPIRY_CHILD"

// ExpiryChildMain is for a test binary's TestMain, first: in a writer that
// RunExpiry started, it runs ExpiryChild on the store open opens, with the
// real clock and a sweeper every 100 ms, and exits; elsewhere it returns.
func ExpiryChildMain(open ExpiryOpener) {
	v := os.Getenv(expiryChildEnv)
	if v == "" {
		return
	}
	seed, where, _ := strings.Cut(v, " ")
	n, err := strconv.ParseUint(seed, 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	s, err := open(where, nil, 100*time.Millisecond)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Fprintln(os.Stderr, ExpiryChild(context.Background(), s, os.Stdout, n))
	os.Exit(3)
}

// child is the writer of a cycle: the test binary again, which reports on
// its stdout.
func (cfg ExpiryConfig) child(seed uint64) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %s", expiryChildEnv, seed, cfg.Where))
	cmd.Stderr = os.Stderr
	return cmd
}

// ExpiryResult counts what a run checked.
type ExpiryResult struct {
	Cycles, Acknowledged, InFlight, Landed, Expired int
}

func (r ExpiryResult) String() string {
	return fmt.Sprintf("%d kill cycles, %d acknowledged operations, %d in flight at a kill of which %d had landed; "+
		"%d profiles or fields seen expired at a restart", r.Cycles, r.Acknowledged, r.InFlight, r.Landed, r.Expired)
}

// RunExpiry runs the expiry scenario: per cycle a child writes for a
// random moment and is SIGKILLed; then the store is opened at a frozen
// clock and every email must read as the acknowledged operations left it,
// live at that time (or as the one in flight would have, applied at any
// time from its start to the kill): nothing expired visible by lookup,
// listing or count, nothing unexpired lost, deadlines as set. Then the
// sweeper must reclaim every expired profile from the stored counts
// without drift.
func RunExpiry(ctx context.Context, cfg ExpiryConfig) (ExpiryResult, error) {
	cfg.Logf = orDiscard(cfg.Logf)
	rng := rand.New(rand.NewPCG(cfg.Seed, 11))
	state := model.ExpiryState{}
	var res ExpiryResult
	for cycle := range cfg.Cycles {
		cmd := cfg.child(rng.Uint64())
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return res, err
		}
		if err := cmd.Start(); err != nil {
			return res, err
		}
		var lines []line
		done, first := make(chan error, 1), make(chan struct{})
		go func() {
			defer close(first)
			sc := bufio.NewScanner(stdout)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var l line
				if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
					// The last line may be cut by the kill.
					continue
				}
				if len(l.Got.Profile) == 0 {
					l.Got.Profile = nil // a Profile writes none as {}; a real one has its email
				}
				if lines = append(lines, l); len(lines) == 1 {
					first <- struct{}{}
				}
			}
			done <- sc.Err()
		}()
		// Kill at a random moment once the child writes, and restart after
		// a random pause, so that deadlines fall before, during and after.
		select {
		case <-first:
		case <-time.After(30 * time.Second):
		}
		time.Sleep(time.Duration(200+rng.IntN(500)) * time.Millisecond)
		cmd.Process.Kill()
		killed := time.Now().UnixMilli()
		<-done
		cmd.Wait()
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		pending := map[string]line{}
		acked := 0
		for _, l := range lines {
			key := l.Op.Email
			if key == "" {
				key = l.Op.Profile.Email()
			}
			if l.Begin {
				pending[key] = l
				continue
			}
			delete(pending, key)
			next, ok := acknowledge(state, l)
			if !ok {
				for _, h := range lines {
					if h.T0 > l.T0 {
						break
					}
					if !h.Begin && (h.Op.Email == key || h.Op.Profile.Email() == key) {
						cfg.Logf("before it: %s %v fields %v set %v when %v, %v..%v: %v", h.Op.Op, h.Op.Profile, h.Op.Fields, h.Op.Set, h.Op.When, h.T0, h.T1, h.Got)
					}
				}
				return res, fmt.Errorf("cycle %d: %s %s from %d to %d answered %v, which the model gives at no time between",
					cycle, l.Op.Op, key, l.T0, l.T1, l.Got)
			}
			state = next
			acked++
		}
		if acked == 0 {
			return res, fmt.Errorf("cycle %d: no operation was acknowledged", cycle)
		}
		res.Acknowledged += acked
		res.InFlight += len(pending)
		res.Cycles++
		cfg.Logf("cycle %d: killed after %d acknowledged operations, %d in flight", cycle, acked, len(pending))
		if err := verifyExpiry(ctx, cfg, &state, pending, killed, &res); err != nil {
			return res, fmt.Errorf("cycle %d, after the restart: %w", cycle, err)
		}
	}
	return res, nil
}

// acknowledge applies an answered operation at the first time between
// its start and its answer at which the model answers as the store did:
// at its start, or at a deadline that passed meanwhile, or at its end.
func acknowledge(state model.ExpiryState, l line) (model.ExpiryState, bool) {
	if l.Got.Code == partmap.ELOCKCONFLICT {
		return state, true // the sweeper held the partition: nothing was written
	}
	for _, at := range applyTimes(state, l.Op, l.T0, l.T1) {
		next, want := state.ApplyOp(l.Op, at)
		if want.Same(l.Got) {
			return next, true
		}
	}
	return state, false
}

// applyTimes are the times from t0 to t1 at which op may have applied
// that the model tells apart: t0, each deadline of op's profile between,
// and t1.
func applyTimes(state model.ExpiryState, op partmap.Operation, t0, t1 int64) []int64 {
	key := op.Email
	if key == "" {
		key = op.Profile.Email()
	}
	times := []int64{t0}
	e := state[key]
	for _, at := range append(slices.Collect(maps.Values(e.Deadlines.Fields)), e.Deadlines.Profile) {
		if at > t0 && at <= t1 {
			times = append(times, at)
		}
	}
	return append(times, t1)
}

// verifyExpiry opens the store at a frozen now and holds it to state.
func verifyExpiry(ctx context.Context, cfg ExpiryConfig, state *model.ExpiryState, pending map[string]line, killed int64, res *ExpiryResult) error {
	var frozen atomic.Int64
	frozen.Store(time.Now().UnixMilli())
	now := frozen.Load()
	s, err := cfg.Open(cfg.Where, func() time.Time { return time.UnixMilli(frozen.Load()) }, 50*time.Millisecond)
	if err != nil {
		return err
	}
	defer s.Close()
	for c := range ExpiryClients {
		for _, email := range expiryEmails(c) {
			got, err := readLive(ctx, s, email)
			if err != nil {
				return err
			}
			if e, ok := (*state)[email]; ok {
				if _, alive := e.Live(now); !alive {
					res.Expired++
				} else if len(e.Deadlines.Fields) > 0 {
					for _, at := range e.Deadlines.Fields {
						if at <= now {
							res.Expired++
						}
					}
				}
			}
			if sameLive(got, *state, email, now) {
				continue
			}
			l, inFlight := pending[email]
			landed := false
			if inFlight {
				for _, at := range applyTimes(*state, l.Op, l.T0, killed) {
					next, _ := state.ApplyOp(l.Op, at)
					if sameLive(got, next, email, now) {
						*state, landed = next, true
						res.Landed++
						break
					}
				}
			}
			if !landed {
				want, _ := (*state)[email].Live(now)
				msg := fmt.Sprintf("%s at %d reads %s %+v; acknowledged operations left %s %+v",
					email, now, model.Describe(got.Profile), got.Deadlines, model.Describe(want.Profile), want.Deadlines)
				if inFlight {
					msg += fmt.Sprintf(", and %s %+v was in flight from %d", l.Op.Op, l.Op, l.T0)
				}
				return errors.New(msg)
			}
		}
	}
	live := state.LiveAt(now)
	// Listing and counts show the live profiles, and no expired one.
	listed := map[string]bool{}
	cursor := ""
	for {
		page, err := s.ListProfiles(ctx, partmap.ListOptions{Cursor: cursor, Limit: partmap.MaxPageLimit})
		if err != nil {
			return err
		}
		for _, rec := range page.Profiles {
			want, ok := live[rec.Profile.Email()]
			if !ok || !model.Equal(rec.Profile, want.Profile) {
				return fmt.Errorf("listed %s %s, model %s (live %v)", rec.Profile.Email(), model.Describe(rec.Profile), model.Describe(want.Profile), ok)
			}
			listed[rec.Profile.Email()] = true
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if len(listed) != len(live) {
		return fmt.Errorf("listed %d profiles, %d are live", len(listed), len(live))
	}
	stats, err := s.ListPartitions(ctx)
	if err != nil {
		return err
	}
	if stats.TotalProfiles != int64(len(live)) {
		return fmt.Errorf("partitions count %d profiles, %d are live", stats.TotalProfiles, len(live))
	}
	// Within a few sweeps, the stored counts hold no expired profile, and
	// the check finds no drift.
	deadline := time.Now().Add(5 * time.Second)
	for {
		var stored int64
		drift := ""
		err := s.CheckPartitions(ctx, 0, 0, func(c partmap.PartitionCheck) error {
			stored += c.Counted
			if !c.OK() && drift == "" {
				drift = fmt.Sprintf("%+v", c)
			}
			return nil
		})
		switch {
		case partmap.ErrorCode(err) == partmap.ELOCKCONFLICT && time.Now().Before(deadline):
			// A lock of the killed child's, on a shared store, until its TTL.
		case err != nil:
			return err
		case drift != "":
			return fmt.Errorf("check found drift: %s", drift)
		case stored == int64(len(live)):
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("the sweeper left %d profiles stored, %d are live", stored, len(live))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// liveRecord is a profile as read, with its deadlines; a nil Profile is
// none.
type liveRecord struct {
	Profile   partmap.Profile
	Deadlines partmap.Deadlines
}

func readLive(ctx context.Context, s partmap.Store, email string) (liveRecord, error) {
	rec, err := s.FindProfile(ctx, email)
	if errors.Is(err, partmap.ErrNotFound) {
		return liveRecord{}, nil
	}
	if err != nil {
		return liveRecord{}, err
	}
	fields := slices.Sorted(maps.Keys(rec.Profile))
	ttl, err := s.Deadlines(ctx, email, fields)
	if err != nil {
		return liveRecord{}, err
	}
	out := liveRecord{Profile: rec.Profile}
	if ttl.Profile > 0 {
		out.Deadlines.Profile = ttl.Profile
	}
	for i, f := range fields {
		if at := ttl.Deadlines[i]; at > 0 {
			if out.Deadlines.Fields == nil {
				out.Deadlines.Fields = map[string]int64{}
			}
			out.Deadlines.Fields[f] = at
		}
	}
	return out, nil
}

// sameLive reports whether got is email's profile in state, live at now.
func sameLive(got liveRecord, state model.ExpiryState, email string, now int64) bool {
	want, ok := state[email].Live(now)
	if !ok {
		return got.Profile == nil
	}
	return model.Equal(got.Profile, want.Profile) && got.Deadlines.Profile == want.Deadlines.Profile &&
		maps.Equal(got.Deadlines.Fields, want.Deadlines.Fields)
}
