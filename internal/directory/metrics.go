package directory

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

// storeMetrics measure the store beneath the HTTP layer: how long writers
// wait for partition locks and how long commits take to become durable.
type storeMetrics struct {
	lockWait *prometheus.HistogramVec
	commit   *prometheus.HistogramVec
}

func newStoreMetrics() *storeMetrics {
	buckets := prometheus.ExponentialBuckets(0.00002, 2, 18) // 20 µs to about 2.6 s
	return &storeMetrics{
		lockWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "partmap_store_lock_wait_seconds", Buckets: buckets,
			Help: "Time to take a write's partition locks; outcome is ok, conflict or error.",
		}, []string{"outcome"}),
		commit: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "partmap_store_commit_seconds", Buckets: buckets,
			Help: "Time from a write's commit until it is durable (fsync, or Redis replication when required); outcome is ok or error.",
		}, []string{"outcome"}),
	}
}

func gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

// background is a goroutine of the directory's that runs until it closes.
type background struct {
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// start runs loop in a goroutine of its own; its context ends, and stop
// closes, when halt is called.
func (b *background) start(loop func(ctx context.Context, stop <-chan struct{})) {
	b.stop, b.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(b.done)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			<-b.stop
			cancel()
		}()
		loop(ctx, b.stop)
	}()
}

// halt ends the goroutine, if it started, and waits for it.
func (b *background) halt() {
	if b.stop == nil {
		return
	}
	b.once.Do(func() { close(b.stop) })
	<-b.done
}

func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, partmap.ErrLockConflict):
		return "conflict"
	default:
		return "error"
	}
}

// hooks reports the engine's lock waits and commits to m.
func (m *storeMetrics) hooks() engine.Hooks {
	return engine.Hooks{
		Locked:    func(t time.Duration, err error) { m.lockWait.WithLabelValues(outcome(err)).Observe(t.Seconds()) },
		Committed: func(t time.Duration, err error) { m.commit.WithLabelValues(outcome(err)).Observe(t.Seconds()) },
	}
}

// Collectors returns the store's Prometheus metrics, for a server's
// registry.
func (d *Directory) Collectors() []prometheus.Collector {
	return append(append([]prometheus.Collector{d.metrics.lockWait, d.metrics.commit}, d.sweeper.collectors()...), d.trimmer.collectors()...)
}
