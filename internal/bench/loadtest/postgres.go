package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partmap/partmap/internal/bench/procstat"
	"github.com/partmap/partmap/internal/bench/rounds"
	"github.com/partmap/partmap/internal/pgtest"
)

// The postgres phase (--phases put,postgres) measures PostgreSQL as the
// reference for a durable write: a cluster of its own (internal/pgtest:
// initdb, PostgreSQL's default durability, every commit fsynced), one
// table of the same profiles as jsonb by email, preloaded as the servers
// are, and 64 clients upserting whole profiles for the phase's duration,
// as the put phase's 64 connections PUT them. It runs in each round right
// after the put phase; the report sets partmap's PUT rate against it. The
// clients run in this process, PostgreSQL in its own: its CPU is the
// postmaster's and its backends'.

const pgClients = 64

type pgTarget struct {
	profiles int
	srv      *pgtest.Server
	pool     *pgxpool.Pool
	samples  []pgSample
}

type pgSample struct {
	perSecond float64
	cpuPerOp  float64 // µs of PostgreSQL's CPU per upsert
}

const pgUpsert = `INSERT INTO profiles (email, profile) VALUES ($1, $2)
ON CONFLICT (email) DO UPDATE SET profile = EXCLUDED.profile`

// pgProfile is the put phase's profile of user i, as JSON.
func pgProfile(i int, rng *rand.Rand) string {
	tier := []string{"gold", "silver", "bronze"}[rng.IntN(3)]
	return fmt.Sprintf(`{"emailAddress":"user%d@example.com","fullName":"User %d","companyName":"Company %d","customerTier":%q,"visits":"%d"}`,
		i, i, i%1000, tier, rng.IntN(1_000_000))
}

// startPostgres starts a cluster and preloads n profiles.
func startPostgres(ctx context.Context, n int, logf func(string, ...any)) (_ *pgTarget, err error) {
	srv, err := pgtest.New()
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			srv.Close()
		}
	}()
	srv.MaxConnections = pgClients + 10 // the clients, and room for the test's own
	if err := srv.Start(); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(srv.URL())
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = pgClients
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	p := &pgTarget{profiles: n, srv: srv, pool: pool}
	logf("preloading PostgreSQL@%s (%s)", short(n), srv.Dir)
	begin := time.Now()
	if _, err := pool.Exec(ctx, `CREATE TABLE profiles (email text PRIMARY KEY, profile jsonb NOT NULL)`); err != nil {
		pool.Close()
		return nil, err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	rows := make([][]any, n)
	for i := range rows {
		rows[i] = []any{"user" + strconv.Itoa(i) + "@example.com", pgProfile(i, rng)}
	}
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"profiles"}, []string{"email", "profile"}, pgx.CopyFromRows(rows)); err != nil {
		pool.Close()
		return nil, fmt.Errorf("preloading PostgreSQL: %w", err)
	}
	for _, sql := range []string{`VACUUM ANALYZE profiles`, `CHECKPOINT`} { // each outside a transaction
		if _, err := pool.Exec(ctx, sql); err != nil {
			pool.Close()
			return nil, err
		}
	}
	logf("preloaded PostgreSQL@%s in %.1f s", short(n), time.Since(begin).Seconds())
	return p, nil
}

func (p *pgTarget) close() {
	p.pool.Close()
	p.srv.Close()
}

// cpuTicks is the CPU of the postmaster and of its children: the backends,
// the WAL writer, the checkpointer.
func (p *pgTarget) cpuTicks() (int64, error) {
	b, err := os.ReadFile(filepath.Join(p.srv.Dir, "data", "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return 0, fmt.Errorf("postmaster.pid: %q", first)
	}
	return procstat.FamilyCPUTicks(pid)
}

// run upserts random profiles from pgClients clients for d.
func (p *pgTarget) run(ctx context.Context, d time.Duration, clkTck float64) (pgSample, error) {
	// Every client's connection first, so that no connection's start
	// counts in the phase.
	conns := make([]*pgxpool.Conn, pgClients)
	for i := range conns {
		c, err := p.pool.Acquire(ctx)
		if err != nil {
			return pgSample{}, err
		}
		defer c.Release()
		conns[i] = c
	}
	before, err := p.cpuTicks()
	if err != nil {
		return pgSample{}, err
	}
	var ops atomic.Int64
	var mu sync.Mutex
	var failed error
	var wg sync.WaitGroup
	begin := time.Now()
	deadline := begin.Add(d)
	for i, c := range conns {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), uint64(begin.UnixNano())))
			for time.Now().Before(deadline) {
				n := rng.IntN(p.profiles)
				if _, err := c.Exec(ctx, pgUpsert, "user"+strconv.Itoa(n)+"@example.com", pgProfile(n, rng)); err != nil {
					mu.Lock()
					failed = errors.Join(failed, err)
					mu.Unlock()
					return
				}
				ops.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(begin)
	if failed != nil {
		return pgSample{}, fmt.Errorf("PostgreSQL upserts: %w", failed)
	}
	after, err := p.cpuTicks()
	if err != nil {
		return pgSample{}, err
	}
	n := float64(ops.Load())
	if n == 0 {
		return pgSample{}, errors.New("PostgreSQL upserted nothing")
	}
	return pgSample{perSecond: n / elapsed.Seconds(), cpuPerOp: float64(after-before) / clkTck * 1e6 / n}, nil
}

// reportPostgres sets each partmap's PUT rate against PostgreSQL's upserts
// at its size, round by round.
func reportPostgres(w io.Writer, targets []*target, pgs []*pgTarget) {
	fmt.Fprintf(w, "\nPostgreSQL, %d clients upserting whole profiles (jsonb by email), fsync on every commit, each round right after the put phase:\n\n", pgClients)
	fmt.Fprintf(w, "| server | profiles | upserts/s | CPU µs/upsert | partmap PUT ÷ PostgreSQL | partmap CPU/PUT ÷ PostgreSQL's |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, pg := range pgs {
		var rates, cpus []float64
		for _, s := range pg.samples {
			rates, cpus = append(rates, s.perSecond), append(cpus, s.cpuPerOp)
		}
		for _, t := range targets {
			if t.kind == "bare" || t.profiles != pg.profiles {
				continue
			}
			puts := t.samples["put"]
			var rate, cpu []float64
			for i := range min(len(puts), len(pg.samples)) {
				rate = append(rate, puts[i].wrk.PerSecond/pg.samples[i].perSecond)
				cpu = append(cpu, puts[i].cpuPerReq/pg.samples[i].cpuPerOp)
			}
			fmt.Fprintf(w, "| %s | %s | %s | %.1f | %.2f | %.2f |\n", t.kind, thousands(pg.profiles),
				thousands(int(rounds.Median(rates))), rounds.Median(cpus), rounds.Median(rate), rounds.Median(cpu))
		}
	}
}
