package http

import (
	"context"
	"math"
	"net/http"
	"net/http/pprof"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/auth"
)

// metrics are the server's Prometheus metrics, in a registry of its own so
// that several servers in one process (tests) do not collide.
type metrics struct {
	registry  *prometheus.Registry
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	conflicts prometheus.Counter
	inFlight  prometheus.Gauge
	routes    sync.Map // route pattern → *routeMetrics
}

// routeMetrics are one route's children of requests and latency, looked
// up once: finding a child by its labels hashes them on every request.
type routeMetrics struct {
	latency  prometheus.Observer
	byStatus sync.Map // status code → prometheus.Counter
}

func (m *metrics) route(pattern string) *routeMetrics {
	if rm, ok := m.routes.Load(pattern); ok {
		return rm.(*routeMetrics)
	}
	rm, _ := m.routes.LoadOrStore(pattern, &routeMetrics{latency: m.latency.WithLabelValues(pattern)})
	return rm.(*routeMetrics)
}

func (m *metrics) count(rm *routeMetrics, pattern string, status int) {
	c, ok := rm.byStatus.Load(status)
	if !ok {
		c, _ = rm.byStatus.LoadOrStore(status, m.requests.WithLabelValues(pattern, strconv.Itoa(status)))
	}
	c.(prometheus.Counter).Inc()
}

func newMetrics(store partmap.Store) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "partmap_http_requests_total", Help: "HTTP requests by route and status.",
		}, []string{"route", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "partmap_http_request_duration_seconds", Help: "HTTP request latency by route.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16), // 100 µs to about 3 s
		}, []string{"route"}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "partmap_lock_conflicts_total", Help: "Requests answered with a lock conflict.",
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "partmap_http_requests_in_flight", Help: "Requests being served, long polls and event streams included.",
		}),
	}
	// Sizes are read from the store when scraped, so they are never stale.
	stats := func() partmap.PartitionStats {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s, err := store.ListPartitions(ctx)
		if err != nil {
			return partmap.PartitionStats{TotalProfiles: -1}
		}
		return s
	}
	gauge := func(name, help string, f func(partmap.PartitionStats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			s := stats()
			if s.TotalProfiles < 0 {
				return math.NaN()
			}
			return f(s)
		})
	}
	m.registry.MustRegister(m.requests, m.latency, m.conflicts, m.inFlight,
		gauge("partmap_profiles", "Profiles in the directory (NaN when the store cannot answer).",
			func(s partmap.PartitionStats) float64 { return float64(s.TotalProfiles) }),
		gauge("partmap_partitions_in_use", "Partitions that hold at least one profile.",
			func(s partmap.PartitionStats) float64 { return float64(len(s.Partitions)) }),
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	// A store that measures itself (lock waits, commit latency) says so.
	if c, ok := store.(interface{ Collectors() []prometheus.Collector }); ok {
		m.registry.MustRegister(c.Collectors()...)
	}
	return m
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// instrument counts and times every request by its route pattern.
func (m *metrics) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		m.inFlight.Inc()
		defer m.inFlight.Dec()
		next.ServeHTTP(sw, r)
		route := r.Pattern
		if route == "" || route == "/" {
			route = "unmatched" // keeps the label set small whatever is requested
		}
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		rm := m.route(route)
		m.count(rm, route, sw.status)
		rm.latency.Observe(time.Since(start).Seconds())
	})
}

// routeOps mounts the operational routes: health and readiness (open, for
// load balancers), metrics (read scope) and pprof (admin scope).
func (s *Server) routeOps() {
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	s.mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		// A directory that is not started yet still has a store that answers.
		if _, err := s.store.ListPartitions(ctx); err != nil && partmap.ErrorCode(err) != partmap.ENOTSTARTED {
			s.writeError(w, r, &partmap.Error{Code: partmap.EUNAVAILABLE, Message: "the store does not answer", Err: err})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	metricsHandler := promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{})
	s.mux.Handle("GET /metrics", s.require(auth.ScopeRead, metricsHandler))
	s.mux.Handle("/debug/pprof/", s.require(auth.ScopeAdmin, http.HandlerFunc(pprof.Index)))
	s.mux.Handle("/debug/pprof/cmdline", s.require(auth.ScopeAdmin, http.HandlerFunc(pprof.Cmdline)))
	s.mux.Handle("/debug/pprof/profile", s.require(auth.ScopeAdmin, http.HandlerFunc(pprof.Profile)))
	s.mux.Handle("/debug/pprof/symbol", s.require(auth.ScopeAdmin, http.HandlerFunc(pprof.Symbol)))
	s.mux.Handle("/debug/pprof/trace", s.require(auth.ScopeAdmin, http.HandlerFunc(pprof.Trace)))
}

// require lets a request through only with a token of the scope, when the
// server has tokens.
func (s *Server) require(scope auth.Scope, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.authorize(w, r, scope); err != nil {
			s.writeError(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Unwrap lets http.ResponseController reach the real writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
