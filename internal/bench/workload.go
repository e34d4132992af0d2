package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
)

// Workloads, in the order they run.
const (
	Upsert = "upsert" // replace a random profile
	Get    = "get"    // look up a random profile
	Mix    = "mix"    // 80% get, 20% upsert
	Patch  = "patch"  // set one field of a random profile
	Incr   = "incr"   // increment a counter of a random profile
	Hot    = "hot"    // upsert, every key in one partition
	Zipf   = "zipf"   // upsert, keys drawn from a Zipf distribution
	// Transfer moves 1 between the counters of two random profiles in
	// different partitions, in one transaction.
	Transfer = "transfer"
)

// AllWorkloads lists every workload.
var AllWorkloads = []string{Upsert, Get, Mix, Patch, Incr, Hot, Zipf, Transfer}

// keySet names the profiles of a run: email(i) for i < N, plus Hot emails
// that all share one partition.
type keySet struct {
	N   int
	Hot []string
}

// newKeys returns the keys for n preloaded profiles and hot ones.
func newKeys(n, hot int) keySet {
	k := keySet{N: n}
	var p partmap.Partition
	for i := 0; len(k.Hot) < hot; i++ {
		e := "hot" + strconv.Itoa(i) + "@bench.test"
		if len(k.Hot) == 0 {
			p = partmap.PartitionOf(e, partmap.DefaultPartitions)
		}
		if partmap.PartitionOf(e, partmap.DefaultPartitions) == p {
			k.Hot = append(k.Hot, e)
		}
	}
	return k
}

// email is the i-th preloaded email.
func email(i int) string { return "u" + strconv.Itoa(i) + "@bench.test" }

// profile is what the benchmark stores under email.
func profile(email string, n int) partmap.Profile {
	return partmap.Profile{partmap.FieldEmail: email, partmap.FieldFullName: "Bench User " + strconv.Itoa(n),
		partmap.FieldCompanyName: "Acme Corp", partmap.FieldCustomerTier: "gold", "visits": "0"}
}

// Stats are the measurements of one workload against one target. Latencies
// are of the requests that succeeded; a failed one counts in Errors.
type Stats struct {
	Target    string        `json:"target"`
	Workload  string        `json:"workload"`
	Clients   int           `json:"clients"`
	Ops       int           `json:"ops"`
	Seconds   float64       `json:"seconds"`
	OpsPerSec float64       `json:"opsPerSec"`
	P50       time.Duration `json:"p50Nanos"`
	P95       time.Duration `json:"p95Nanos"`
	P99       time.Duration `json:"p99Nanos"`
	P999      time.Duration `json:"p999Nanos"`
	Errors    int           `json:"errors"`
	Conflicts uint64        `json:"lockConflicts"`
	FirstErr  string        `json:"firstError,omitempty"`
}

// newClient returns a client with a connection of its own, as a separate
// program would have.
func newClient(url, token string) (*pmhttp.Client, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 2
	return pmhttp.NewClient(url, &pmhttp.ClientOptions{HTTPClient: &http.Client{Transport: t}, Token: token})
}

// drive runs one workload with the given clients for d and measures it.
// Lock conflicts are retried by the clients and counted; a request that
// fails for good counts as an error.
func drive(ctx context.Context, clients []*pmhttp.Client, workload string, keys keySet, d time.Duration) (Stats, error) {
	op, err := operation(workload, keys)
	if err != nil {
		return Stats{}, err
	}
	st := Stats{Workload: workload, Clients: len(clients)}
	before := conflicts(clients)
	var mu sync.Mutex
	var samples []time.Duration
	var errs atomic.Int64
	var firstErr atomic.Pointer[string]
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for c, cl := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), uint64(start.UnixNano())))
			zipf := rand.NewZipf(rng, 1.1, 1, uint64(max(keys.N-1, 1)))
			local := make([]time.Duration, 0, 4096)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				t0 := time.Now()
				err := op(ctx, cl, rng, zipf)
				if err != nil { // a failure is counted, never timed as an operation
					errs.Add(1)
					msg := err.Error()
					firstErr.CompareAndSwap(nil, &msg)
					continue
				}
				local = append(local, time.Since(t0))
			}
			mu.Lock()
			samples = append(samples, local...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(samples)
	st.Ops, st.Seconds = len(samples), elapsed.Seconds()
	st.OpsPerSec = float64(len(samples)) / elapsed.Seconds()
	st.P50, st.P95, st.P99, st.P999 = pct(samples, 0.50), pct(samples, 0.95), pct(samples, 0.99), pct(samples, 0.999)
	st.Errors = int(errs.Load())
	st.Conflicts = conflicts(clients) - before
	if p := firstErr.Load(); p != nil {
		st.FirstErr = *p
	}
	return st, ctx.Err()
}

func conflicts(clients []*pmhttp.Client) uint64 {
	var n uint64
	for _, c := range clients {
		n += c.LockConflicts()
	}
	return n
}

func pct(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

type opFunc func(ctx context.Context, cl *pmhttp.Client, rng *rand.Rand, zipf *rand.Zipf) error

func operation(workload string, keys keySet) (opFunc, error) {
	if keys.N < 1 {
		return nil, errors.New("bench: preload at least one profile")
	}
	random := func(rng *rand.Rand) (string, int) {
		i := rng.IntN(keys.N)
		return email(i), i
	}
	upsert := func(ctx context.Context, cl *pmhttp.Client, email string, n int) error {
		_, _, err := partmap.UpsertProfile(ctx, cl, profile(email, n), partmap.Condition{})
		return err
	}
	get := func(ctx context.Context, cl *pmhttp.Client, email string) error {
		_, err := cl.FindProfile(ctx, email)
		return err
	}
	switch workload {
	case Upsert:
		return func(ctx context.Context, cl *pmhttp.Client, rng *rand.Rand, _ *rand.Zipf) error {
			e, i := random(rng)
			return upsert(ctx, cl, e, i)
		}, nil
	case Get:
		return func(ctx context.Context, cl *pmhttp.Client, rng *rand.Rand, _ *rand.Zipf) error {
			e, _ := random(rng)
			return get(ctx, cl, e)
		}, nil
	case Mix:
		return func(ctx context.Context, cl *pmhttp.Client, rng *rand.Rand, _ *rand.Zipf) error {
			e, i := random(rng)
			if rng.IntN(5) == 0 {
				return upsert(ctx, cl, e, i)
			}
			return get(ctx, cl, e)
		}, nil
	case Patch:
		return func(ctx context.Context, cl *pmhttp.Client, rng *rand.Rand, _ *rand.Zipf) error {
			e, _ := random(rng)
			v := strconv.Itoa(rng.IntN(1000))
			_, err := partmap.PatchProfile(ctx, cl, e, partmap.Patch{"visits": &v}, partmap.Condition{})
			return err
		}, nil
	case Incr:
		return func(ctx context.Context, cl *pmhttp.Client, rng *rand.Rand, _ *rand.Zipf) error {
			e, _ := random(rng)
			_, err := partmap.IncrementField(ctx, cl, e, "visits", 1, partmap.Condition{})
			return err
		}, nil
	case Hot:
		if len(keys.Hot) == 0 {
			return nil, errors.New("bench: the hot workload needs hot keys")
		}
		return func(ctx context.Context, cl *pmhttp.Client, rng *rand.Rand, _ *rand.Zipf) error {
			i := rng.IntN(len(keys.Hot))
			return upsert(ctx, cl, keys.Hot[i], i)
		}, nil
	case Zipf:
		return func(ctx context.Context, cl *pmhttp.Client, _ *rand.Rand, zipf *rand.Zipf) error {
			i := int(zipf.Uint64())
			return upsert(ctx, cl, email(i), i)
		}, nil
	case Transfer:
		if keys.N < 2 {
			return nil, errors.New("bench: the transfer workload needs two profiles")
		}
		return func(ctx context.Context, cl *pmhttp.Client, rng *rand.Rand, _ *rand.Zipf) error {
			a, _ := random(rng)
			b, _ := random(rng)
			for partmap.PartitionOf(a, partmap.DefaultPartitions) == partmap.PartitionOf(b, partmap.DefaultPartitions) {
				b, _ = random(rng)
			}
			_, err := cl.Transact(ctx, []partmap.Operation{
				{Op: partmap.OpIncrement, Email: a, Field: "visits", By: -1},
				{Op: partmap.OpIncrement, Email: b, Field: "visits", By: 1},
			})
			return err
		}, nil
	}
	return nil, fmt.Errorf("bench: unknown workload %q (want one of %v)", workload, AllWorkloads)
}
