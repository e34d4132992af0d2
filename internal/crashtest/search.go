package crashtest

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/model"
	"github.com/partmap/partmap/internal/search"
)

// The search scenario kills a process whose search indexes are being
// built and dropped in the background while its clients write: each
// cycle's writer, a child process, creates an index over the profiles
// there are (the build takes a while), drops the one of two cycles
// before, and writes until it is SIGKILLed. After each kill the test
// opens the store itself: the interrupted build resumes and ends, every
// acknowledged write is there (the one in flight landed or not, whole),
// every index answers its queries exactly as search.Match does over the
// profiles, and the check finds no drift.

// SearchClients and SearchEmails size the child's load: each client owns
// its emails, and renames only among them.
const (
	SearchClients = 4
	SearchEmails  = 3
)

// searchDefs are the definitions the cycles' indexes take in turn.
var searchDefs = []partmap.IndexDefinition{
	{Fields: []partmap.IndexField{{Name: "a", Type: partmap.IndexText}, {Name: "b", Type: partmap.IndexTag, Sortable: true}, {Name: "n", Type: partmap.IndexNumeric, Sortable: true}}},
	{Fields: []partmap.IndexField{{Name: "a", Type: partmap.IndexTag}, {Name: "n", Type: partmap.IndexNumeric}, {Name: "b", Type: partmap.IndexText, NoStem: true, Sortable: true}}, Stopwords: []string{}},
}

// searchQueries are asked of every index after each restart.
var searchQueries = []string{"*", "@b:{gold}", "@n:[0 10]", "alice", "ali*", "run", "-@b:{gold} @n:[(0 +inf]", "@a:{gold | vip} | run", "the"}

var (
	searchA = []string{"alice runs", "gold", "vip", "Alicia", "running late", "the"}
	searchB = []string{"gold", "Gold, vip", "silver", "alice", "run"}
	searchN = []string{"0", "7", "12", "-3", "x", "inf"}
)

func indexDef(cycle int) partmap.IndexDefinition {
	def := searchDefs[cycle%len(searchDefs)]
	def.Name = fmt.Sprintf("crash%d", cycle)
	return def
}

func searchEmails(client int) []string {
	var out []string
	for i := range SearchEmails {
		out = append(out, fmt.Sprintf("c%d-e%d@search.test", client, i))
	}
	return out
}

// searchLine is one report of the child: that the cycle's index changes
// were made (Indexed), or a client's operation before it starts (Begin)
// and with its answer.
type searchLine struct {
	Indexed bool               `json:",omitempty"`
	Client  int                `json:",omitempty"`
	Begin   bool               `json:",omitempty"`
	Op      *partmap.Operation `json:",omitempty"`
	Got     model.ExpiryResult
}

// SearchOpener opens the store of a search run at where.
type SearchOpener func(where string) (ExpiryStore, error)

// SearchConfig describes a run of the search scenario.
type SearchConfig struct {
	Cycles int
	Seed   uint64
	// Open opens the store: in the test, and in the writer of each
	// cycle, the test binary run again, whose TestMain calls
	// SearchChildMain with the same Open.
	Open  SearchOpener
	Where string
	// Preload is how many profiles, which no client writes, are loaded
	// before the first cycle: they make each build last.
	Preload int
	Logf    func(format string, args ...any)
}

// SearchResult counts what a run checked.
type SearchResult struct {
	Cycles, Acknowledged, InFlight, Landed int
	// Resumed counts the restarts that found an index still building,
	// Queries the searches compared with the model.
	Resumed, Queries int
}

func (r SearchResult) String() string {
	return fmt.Sprintf("%d kill cycles, %d acknowledged writes, %d in flight at a kill of which %d had landed; "+
		"%d restarts found a build to resume; %d searches compared with the model", r.Cycles, r.Acknowledged, r.InFlight, r.Landed, r.Resumed, r.Queries)
}

const searchChildEnv = "PARTMAP_SEARCH_CHILD"

// SearchChildMain is for a test binary's TestMain, first: in a writer that
// RunSearch started, it runs SearchChild on the store open opens, and
// exits; elsewhere it returns.
func SearchChildMain(open SearchOpener) {
	v := os.Getenv(searchChildEnv)
	if v == "" {
		return
	}
	parts := strings.SplitN(v, " ", 3)
	seed, err1 := strconv.ParseUint(parts[0], 10, 64)
	cycle, err2 := strconv.Atoi(parts[1])
	if len(parts) < 3 || err1 != nil || err2 != nil {
		fmt.Fprintf(os.Stderr, "%s=%q\n", searchChildEnv, v)
		os.Exit(2)
	}
	s, err := open(parts[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Fprintln(os.Stderr, SearchChild(context.Background(), s, os.Stdout, seed, cycle))
	os.Exit(3)
}

// SearchChild creates cycle's index, drops the one of two cycles before,
// says so on out, and writes until it is killed, reporting each
// operation before and after it.
func SearchChild(ctx context.Context, s partmap.Store, out io.Writer, seed uint64, cycle int) error {
	if _, err := s.Start(ctx); err != nil {
		return err
	}
	var mu sync.Mutex
	report := func(l searchLine) {
		b, _ := json.Marshal(l)
		mu.Lock()
		defer mu.Unlock()
		out.Write(append(b, '\n')) // one write: a line reaches the parent whole or not at all
	}
	if err := s.CreateIndex(ctx, indexDef(cycle)); err != nil && partmap.ErrorCode(err) != partmap.EEXISTS {
		return err
	}
	if cycle >= 2 {
		if err := s.DropIndex(ctx, indexDef(cycle-2).Name); err != nil && partmap.ErrorCode(err) != partmap.ENOTFOUND {
			return err
		}
	}
	report(searchLine{Indexed: true})
	var wg sync.WaitGroup
	for c := range SearchClients {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(c)))
			emails := searchEmails(c)
			for ctx.Err() == nil {
				op := searchOp(r, emails)
				report(searchLine{Client: c, Begin: true, Op: &op})
				var res partmap.OperationResult
				var err error
				for {
					if res, err = s.Apply(ctx, op); partmap.ErrorCode(err) != partmap.ELOCKCONFLICT {
						break // a build or a cleaning held the partition: nothing was written
					}
					time.Sleep(time.Millisecond)
				}
				report(searchLine{Client: c, Op: &op, Got: model.FromOperation(res, err)})
			}
		})
	}
	wg.Wait()
	return ctx.Err()
}

func searchOp(r *rand.Rand, emails []string) partmap.Operation {
	email := emails[r.IntN(len(emails))]
	pick := func(vs []string) *string { return &vs[r.IntN(len(vs))] }
	op := partmap.Operation{Email: email}
	switch r.IntN(8) {
	case 0, 1, 2:
		op.Op, op.Email, op.Profile = partmap.OpPut, "", partmap.Profile{partmap.FieldEmail: email, "a": *pick(searchA), "b": *pick(searchB), "n": *pick(searchN)}
	case 3:
		op.Op, op.Patch = partmap.OpPatch, partmap.Patch{"b": pick(searchB)}
	case 4:
		op.Op, op.Patch = partmap.OpPatch, partmap.Patch{"a": nil, "n": pick(searchN)}
	case 5:
		op.Op, op.Field, op.By = partmap.OpIncrement, "n", 1
	case 6:
		op.Op = partmap.OpDelete
	default:
		op.Op, op.To, op.Replace = partmap.OpRename, emails[r.IntN(len(emails))], true
	}
	return op
}

func (cfg SearchConfig) child(seed uint64, cycle int) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %d %s", searchChildEnv, seed, cycle, cfg.Where))
	cmd.Stderr = os.Stderr
	return cmd
}

// RunSearch runs the search scenario.
func RunSearch(ctx context.Context, cfg SearchConfig) (SearchResult, error) {
	cfg.Logf = orDiscard(cfg.Logf)
	rng := rand.New(rand.NewPCG(cfg.Seed, 13))
	state := model.ExpiryState{}
	var res SearchResult
	if err := preloadSearch(ctx, cfg, state); err != nil {
		return res, err
	}
	for cycle := range cfg.Cycles {
		cmd := cfg.child(rng.Uint64(), cycle)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return res, err
		}
		if err := cmd.Start(); err != nil {
			return res, err
		}
		var lines []searchLine
		done, indexed := make(chan error, 1), make(chan struct{})
		go func() {
			sc := bufio.NewScanner(stdout)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var l searchLine
				if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
					continue // the last line may be cut by the kill
				}
				if len(l.Got.Profile) == 0 {
					l.Got.Profile = nil
				}
				lines = append(lines, l)
				if l.Indexed {
					close(indexed)
				}
			}
			done <- sc.Err()
		}()
		// Kill at a random moment once the index is created: while it
		// builds, mostly.
		select {
		case <-indexed:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			cmd.Wait()
			return res, fmt.Errorf("cycle %d: the writer did not create its index", cycle)
		}
		time.Sleep(time.Duration(10+rng.IntN(300)) * time.Millisecond)
		cmd.Process.Kill()
		<-done
		cmd.Wait()
		pending := map[int]searchLine{}
		acked := 0
		for _, l := range lines {
			if l.Indexed {
				continue
			}
			if l.Begin {
				pending[l.Client] = l
				continue
			}
			delete(pending, l.Client)
			next, want := state.ApplyOp(*l.Op, 0)
			if !want.Same(l.Got) {
				return res, fmt.Errorf("cycle %d: %s %s answered %v, model %v", cycle, l.Op.Op, l.Op.Email+l.Op.Profile.Email(), l.Got, want)
			}
			state = next
			acked++
		}
		res.Acknowledged += acked
		res.InFlight += len(pending)
		res.Cycles++
		cfg.Logf("cycle %d: killed after %d acknowledged writes, %d in flight", cycle, acked, len(pending))
		if err := verifySearch(ctx, cfg, cycle, &state, pending, &res); err != nil {
			return res, fmt.Errorf("cycle %d, after the restart: %w", cycle, err)
		}
	}
	return res, nil
}

// preloadSearch loads cfg.Preload profiles that no client writes.
func preloadSearch(ctx context.Context, cfg SearchConfig, state model.ExpiryState) error {
	s, err := cfg.Open(cfg.Where)
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := s.Start(ctx); err != nil {
		return err
	}
	for i := 0; i < cfg.Preload; {
		batch := make([]partmap.Profile, 0, min(cfg.Preload-i, partmap.MaxBulkProfiles))
		for ; i < cfg.Preload && len(batch) < cap(batch); i++ {
			p := partmap.Profile{partmap.FieldEmail: fmt.Sprintf("p%05d@search.test", i),
				"a": searchA[i%len(searchA)], "b": searchB[i%len(searchB)], "n": searchN[i%len(searchN)]}
			batch = append(batch, p)
			state[p.Email()] = model.Entry{Profile: p}
		}
		out, err := s.UpsertProfiles(ctx, batch)
		if err != nil {
			return err
		}
		for _, r := range out {
			if r.Err != nil {
				return r.Err
			}
		}
	}
	return nil
}

// verifySearch opens the store and holds it to state: each client's
// profiles as acknowledged (or with the write in flight landed), every
// index built in the end and exact, no drift.
func verifySearch(ctx context.Context, cfg SearchConfig, cycle int, state *model.ExpiryState, pending map[int]searchLine, res *SearchResult) error {
	s, err := cfg.Open(cfg.Where)
	if err != nil {
		return err
	}
	defer s.Close()
	infos, err := s.ListIndexes(ctx)
	if err != nil {
		return err
	}
	for _, x := range infos {
		if x.Building {
			res.Resumed++
			break
		}
	}
	for c := range SearchClients {
		emails := searchEmails(c)
		same := func(st model.ExpiryState) (bool, error) {
			for _, e := range emails {
				rec, err := s.FindProfile(ctx, e)
				var got partmap.Profile
				switch {
				case partmap.ErrorCode(err) == partmap.ENOTFOUND:
				case err != nil:
					return false, err
				default:
					got = rec.Profile
				}
				if !model.Equal(got, st[e].Profile) {
					return false, nil
				}
			}
			return true, nil
		}
		ok, err := same(*state)
		if err != nil {
			return err
		}
		if ok {
			continue
		}
		l, inFlight := pending[c]
		if inFlight {
			next, _ := state.ApplyOp(*l.Op, 0)
			if ok, err = same(next); err != nil {
				return err
			}
			if ok {
				*state = next
				res.Landed++
				continue
			}
		}
		var got []string
		for _, e := range emails {
			rec, _ := s.FindProfile(ctx, e)
			got = append(got, e+" "+model.Describe(rec.Profile))
		}
		msg := fmt.Sprintf("client %d's profiles read %v; acknowledged writes left %v", c, got, describeState(*state, emails))
		if inFlight {
			msg += fmt.Sprintf(", and %s %+v was in flight", l.Op.Op, *l.Op)
		}
		return fmt.Errorf("%s", msg)
	}
	// The interrupted build resumed: wait for every index to answer.
	deadline := time.Now().Add(time.Minute)
	for _, x := range infos {
		for {
			_, err := s.Search(ctx, x.Name, partmap.SearchOptions{Query: "*", Limit: -1})
			if err == nil {
				break
			}
			if partmap.ErrorCode(err) != partmap.EUNAVAILABLE || time.Now().After(deadline) {
				return fmt.Errorf("index %s: %w", x.Name, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// The cycle's index is there, and the one of two cycles before gone,
	// if the child said it made them so.
	names := map[string]bool{}
	for _, x := range infos {
		names[x.Name] = true
	}
	if !names[indexDef(cycle).Name] || (cycle >= 2 && names[indexDef(cycle-2).Name]) {
		return fmt.Errorf("the indexes after cycle %d are %v", cycle, slices.Sorted(func(yield func(string) bool) {
			for n := range names {
				if !yield(n) {
					return
				}
			}
		}))
	}
	stats, err := s.ListPartitions(ctx)
	if err != nil {
		return err
	}
	for _, x := range infos {
		var k int
		if _, err := fmt.Sscanf(x.Name, "crash%d", &k); err != nil {
			continue // the legacy index
		}
		if err := checkIndex(ctx, s, indexDef(k), *state, stats.MapPartitions(), res); err != nil {
			return fmt.Errorf("index %s: %w", x.Name, err)
		}
	}
	// No entry drifts from its profile, and none of a dropped index is
	// left. (A killed child's locks on a shared store last until their
	// TTL.)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		err := s.CheckPartitions(ctx, 0, 0, func(c partmap.PartitionCheck) error {
			if !c.OK() {
				return fmt.Errorf("check found drift: %+v", c)
			}
			return nil
		})
		if err == nil {
			return nil
		}
		if partmap.ErrorCode(err) != partmap.ELOCKCONFLICT || time.Now().After(deadline) {
			return err
		}
	}
}

func describeState(state model.ExpiryState, emails []string) []string {
	var out []string
	for _, e := range emails {
		out = append(out, e+" "+model.Describe(state[e].Profile))
	}
	return out
}

// checkIndex asks the index each of searchQueries, unsorted and sorted by
// its first sortable field both ways, and compares every hit, in order, and
// the total with search.Match over state's profiles.
func checkIndex(ctx context.Context, s partmap.Store, def partmap.IndexDefinition, state model.ExpiryState, partitions int, res *SearchResult) error {
	schema, err := schemaOf(def)
	if err != nil {
		return err
	}
	type order struct {
		by   string
		desc bool
	}
	orders := []order{{}}
	for _, f := range def.Fields {
		if f.Sortable {
			orders = append(orders, order{f.Name, false}, order{f.Name, true})
			break
		}
	}
	for _, q := range searchQueries {
		node, perr := search.Parse(schema, q)
		for _, o := range orders {
			got, err := s.Search(ctx, def.Name, partmap.SearchOptions{Query: q, SortBy: o.by, Descending: o.desc, Limit: partmap.MaxSearchLimit, NoContent: true})
			res.Queries++
			if perr != nil {
				if partmap.ErrorCode(err) != partmap.EINVALID {
					return fmt.Errorf("%q: %v, want %v", q, err, perr)
				}
				continue
			}
			if err != nil {
				return fmt.Errorf("%q: %w", q, err)
			}
			var want []partmap.Profile
			for _, e := range state {
				if e.Profile != nil && search.Match(schema, node, e.Profile) {
					want = append(want, e.Profile)
				}
			}
			if o.by != "" {
				cmpFn, err := schema.Order(o.by, o.desc)
				if err != nil {
					return err
				}
				slices.SortFunc(want, func(a, b partmap.Profile) int { return cmpFn(a, b) })
			} else {
				slices.SortFunc(want, func(a, b partmap.Profile) int {
					return cmp.Or(cmp.Compare(partmap.PartitionOf(a.Email(), partitions), partmap.PartitionOf(b.Email(), partitions)), strings.Compare(a.Email(), b.Email()))
				})
			}
			if got.Total != int64(len(want)) || len(got.Hits) != len(want) {
				return fmt.Errorf("%q sorted by %q (desc %v): total %d with %d hits, model %d", q, o.by, o.desc, got.Total, len(got.Hits), len(want))
			}
			for i, h := range got.Hits {
				if h.Email != want[i].Email() {
					return fmt.Errorf("%q sorted by %q (desc %v): hit %d is %s, model %s", q, o.by, o.desc, i, h.Email, want[i].Email())
				}
			}
		}
	}
	return nil
}

// schemaOf reads a definition as the model does (storetest's oracle
// does the same): the directory's compilation is what is under test.
func schemaOf(def partmap.IndexDefinition) (*search.Schema, error) {
	var fields []search.Field
	for _, f := range def.Fields {
		sf := search.Field{Name: f.Name, Sortable: f.Sortable, NoStem: f.NoStem, CaseSensitive: f.CaseSensitive}
		switch f.Type {
		case partmap.IndexTag:
			sf.Type = search.TypeTag
		case partmap.IndexNumeric:
			sf.Type = search.TypeNumeric
		}
		if f.Separator != "" {
			sf.Separator = f.Separator[0]
		}
		fields = append(fields, sf)
	}
	return search.NewSchema(fields, search.Options{Stopwords: def.Stopwords})
}
