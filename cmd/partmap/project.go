package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/schollz/progressbar/v3"

	"github.com/partmap/partmap/postgres"
)

// farBehind is the lag past which a projection that starts draws its
// progress: catching up is then worth watching.
const farBehind = 5 * time.Second

func runProject(ctx context.Context, e *env, args []string) error {
	cf := newClientCommand(e, "project", "--to postgres://…")
	to := cf.fs.String("to", e.getenv("PARTMAP_PROJECT_TO"), "PostgreSQL connection `URL` (postgres://user:password@host:5432/db) to project into; $PARTMAP_PROJECT_TO sets the default")
	table := cf.fs.String("table", postgres.DefaultTable, "the projected `table`: NAME or SCHEMA.NAME, created if missing")
	rebuild := cf.fs.Bool("rebuild", false, "empty the table and copy every profile again before following the change feed (after cursor-expired)")
	metricsAddr := cf.fs.String("metrics-addr", "", "serve the projection's Prometheus metrics (lag, changes) on `HOST:PORT` at /metrics, such as 127.0.0.1:9465")
	progress := cf.fs.Bool("progress", false, "draw the progress bar even when stderr is not a terminal")
	logEvery := cf.fs.Duration("log-every", 10*time.Second, "when no progress bar is drawn, log how far the projection is this often while it moves (0: never)")
	_, cl, err := cf.parse(args, 0, 0)
	if err != nil {
		return err
	}
	if *to == "" {
		return usagef("name the PostgreSQL database with --to postgres://…")
	}
	if _, err := postgres.ParseTable(*table); err != nil {
		return usagef("--table: %s", describe(err))
	}
	cfg, err := pgxpool.ParseConfig(*to)
	if err != nil {
		return usagef("--to: %v", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg) // connects lazily: a database still down is retried
	if err != nil {
		return err
	}
	defer pool.Close()

	logger := slog.New(slog.NewTextHandler(e.stderr, nil))
	show := &projectProgress{e: e, visible: *progress || isTerminal(e.stderr)}
	p, err := postgres.New(cl, pool, postgres.Options{Table: *table, Rebuild: *rebuild, Logger: logger, OnProgress: show.update})
	if err != nil {
		return err
	}
	if *metricsAddr != "" {
		stop, err := serveMetrics(e, *metricsAddr, p.Collectors())
		if err != nil {
			return err
		}
		defer stop()
	}
	if !show.visible && *logEvery > 0 {
		done := make(chan struct{})
		defer close(done)
		go logProgress(logger, p, *logEvery, done)
	}
	logger.Info("projecting the directory into PostgreSQL", "server", cf.server, "table", *table, "database", cfg.ConnConfig.Database)
	err = p.Run(ctx)
	show.finish()
	if err != nil {
		return err
	}
	pr := p.Progress()
	logger.Info("projection stopped", "changes", pr.Changes, "cursor", pr.Cursor)
	return nil
}

// serveMetrics serves /metrics on addr until stop.
func serveMetrics(e *env, addr string, collectors []prometheus.Collector) (stop func(), err error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors...)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	fmt.Fprintf(e.stderr, "serving metrics on http://%s/metrics\n", l.Addr())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}, nil
}

// logProgress logs a line every interval while the projection moves or
// lags.
func logProgress(logger *slog.Logger, p *postgres.Projector, every time.Duration, done chan struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	var last postgres.Progress
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		pr := p.Progress()
		switch {
		case pr.Copying && pr.Copied != last.Copied:
			logger.Info("projection: copying", "profiles", pr.Copied)
		case !pr.Copying && (pr.Changes != last.Changes || pr.Lag > 0):
			logger.Info("projection: following the change feed", "changes", pr.Changes,
				"per_second", int(float64(pr.Changes-last.Changes)/every.Seconds()), "lag", pr.Lag.Round(time.Millisecond))
		}
		last = pr
	}
}

// projectProgress draws a copy's count, and, when the projection starts
// far behind, its lag shrinking as it catches up.
type projectProgress struct {
	e       *env
	visible bool
	mu      sync.Mutex
	bar     *progressbar.ProgressBar
	copying bool
	from    time.Time // the commit time of the first change the bar counts
	until   time.Time // when the bar started: the backlog it measures ends there
	decided bool      // whether to draw the catching up is decided
}

func (s *projectProgress) update(pr postgres.Progress) {
	if !s.visible {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if pr.Copying {
		if s.bar == nil {
			s.copying = true
			s.bar = progressbar.NewOptions64(-1, progressbar.OptionSetWriter(s.e.stderr), progressbar.OptionSetDescription("copying"),
				progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("profiles"),
				progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
		}
		s.bar.Set64(pr.Copied)
		return
	}
	if s.copying {
		s.bar.Finish()
		s.bar, s.copying = nil, false
	}
	if !s.decided {
		s.decided = true
		if pr.Lag < farBehind {
			return
		}
		s.from, s.until = pr.Time, time.Now()
		s.bar = progressbar.NewOptions64(1000, progressbar.OptionSetWriter(s.e.stderr),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish(), progressbar.OptionSetPredictTime(true))
	}
	if s.bar == nil {
		return
	}
	// The share of the backlog found at the start, in time, applied.
	s.bar.Describe(fmt.Sprintf("catching up: %d changes applied, %s behind", pr.Changes, pr.Lag.Round(time.Second)))
	if span := s.until.Sub(s.from); span > 0 {
		s.bar.Set64(min(1000, max(0, int64(1000*pr.Time.Sub(s.from).Seconds()/span.Seconds()))))
	}
	if pr.CaughtUp {
		s.bar.Finish()
		s.bar = nil
		fmt.Fprintf(s.e.stderr, "caught up: %s applied\n", count(pr.Changes, "change"))
	}
}

func (s *projectProgress) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bar != nil {
		s.bar.Finish()
		s.bar = nil
	}
}
