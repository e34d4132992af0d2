package redis

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	goredis "github.com/redis/go-redis/v9"
)

// maxBatch bounds one pipeline: a few dozen commands already share their
// syscalls, and a bigger one only delays its first reply.
const maxBatch = 64

// batchWorkers is how many pipelines are in flight at once. With 64
// clients on 2 cores, 2 did best: 1 to 8 were measured (docs/PERFORMANCE.md);
// more workers make smaller batches, and more syscalls.
const batchWorkers = 2

// batcher sends the commands that concurrent requests issue at the same
// moment as one pipeline: one write and one read on a connection for many
// commands, instead of a write, a read and go-redis's connection check for
// each (docs/PERFORMANCE.md, issue 14). A lone caller sends its command
// itself, at once: nobody waits for companions, or for a worker to wake.
// Batches form only while every round trip allowed is in flight.
type batcher struct {
	client goredis.UniversalClient
	queue  chan *queued
	slots  chan struct{} // one token per round trip in flight
	stop   chan struct{}
	wg     sync.WaitGroup

	mu     sync.RWMutex // held to read while sending; close takes it to write
	closed bool

	pipelines, commands atomic.Int64 // for /metrics
}

type queued struct {
	cmd  goredis.Cmder
	done chan struct{}
}

var queuedPool = sync.Pool{New: func() any { return &queued{done: make(chan struct{}, 1)} }}

func newBatcher(client goredis.UniversalClient, workers int) *batcher {
	b := &batcher{client: client, queue: make(chan *queued, 4*maxBatch), slots: make(chan struct{}, workers), stop: make(chan struct{})}
	b.wg.Add(workers)
	for range workers {
		go b.loop()
	}
	return b
}

// do runs cmd in the next pipeline and returns once its reply (or error)
// is in it. It does not give up when ctx ends: a command sent may have
// been applied, and its caller must learn which.
func (b *batcher) do(ctx context.Context, cmd goredis.Cmder) {
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		_ = b.client.Process(ctx, cmd) // the client reports that it is closed
		return
	}
	if len(b.queue) == 0 {
		select {
		case b.slots <- struct{}{}:
			b.mu.RUnlock()
			b.pipelines.Add(1)
			b.commands.Add(1)
			_ = b.client.Process(context.WithoutCancel(ctx), cmd)
			<-b.slots
			return
		default:
		}
	}
	q := queuedPool.Get().(*queued)
	q.cmd = cmd
	b.queue <- q
	b.mu.RUnlock()
	<-q.done
	q.cmd = nil
	queuedPool.Put(q)
}

func (b *batcher) loop() {
	defer b.wg.Done()
	batch := make([]*queued, 0, maxBatch)
	for {
		select {
		case q := <-b.queue:
			batch = append(batch[:0], q)
		case <-b.stop:
			// Nothing is sent after stop: run what is left, then leave.
			for {
				select {
				case q := <-b.queue:
					b.run(append(batch[:0], q))
				default:
					return
				}
			}
		}
		b.slots <- struct{}{} // waiting for a round trip to end lets more queue
	drain:
		for len(batch) < maxBatch {
			select {
			case q := <-b.queue:
				batch = append(batch, q)
			default:
				break drain
			}
		}
		b.run(batch)
		<-b.slots
	}
}

func (b *batcher) run(batch []*queued) {
	b.pipelines.Add(1)
	b.commands.Add(int64(len(batch)))
	ctx := context.Background() // go-redis's read and write timeouts bound it
	if len(batch) == 1 {
		_ = b.client.Process(ctx, batch[0].cmd)
	} else {
		pipe := b.client.Pipeline()
		for _, q := range batch {
			_ = pipe.Process(ctx, q.cmd)
		}
		_, _ = pipe.Exec(ctx) // each command keeps its own error
	}
	for _, q := range batch {
		q.done <- struct{}{}
	}
}

// collectors export how many round trips the batcher made and how many
// commands they carried.
func (b *batcher) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "partmap_redis_round_trips_total",
			Help: "Round trips that carried the commands of lookups and commits, each one pipeline of one or more."},
			func() float64 { return float64(b.pipelines.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "partmap_redis_batched_commands_total",
			Help: "Commands of lookups and commits sent through those round trips."},
			func() float64 { return float64(b.commands.Load()) }),
	}
}

// close runs what is queued and stops the workers; later commands go
// straight to the client. Closing again does nothing.
func (b *batcher) close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	b.mu.Unlock()
	close(b.stop)
	b.wg.Wait()
}
