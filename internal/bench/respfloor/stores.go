package main

import (
	"os"
	"path/filepath"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/tidwall/redcon"
)

type pebbleStore struct{ db *pebble.DB }

// openPebble opens Pebble tuned as partmap's embedded store tunes it: the
// same memtables and block cache, and Bloom filters on every level.
func openPebble(dir string) (*pebbleStore, error) {
	opts := &pebble.Options{MemTableSize: 16 << 20, CacheSize: 64 << 20}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(filepath.Join(dir, "pebble"), opts)
	if err != nil {
		return nil, err
	}
	return &pebbleStore{db}, nil
}

func (p *pebbleStore) set(triples [][3][]byte) ([]int, error) {
	b := p.db.NewBatch()
	defer b.Close()
	for _, t := range triples {
		if err := b.Set(append(append(append([]byte(nil), t[0]...), 0), t[1]...), t[2], nil); err != nil {
			return nil, err
		}
	}
	return make([]int, len(triples)), b.Commit(pebble.Sync)
}

func (p *pebbleStore) get(key, field []byte) ([]byte, bool, error) {
	v, closer, err := p.db.Get(append(append(append([]byte(nil), key...), 0), field...))
	if err == pebble.ErrNotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer closer.Close()
	return append([]byte(nil), v...), true, nil
}

// logStore is Redis's design: the data in memory, every write appended to
// a log that is fsync'd before the reply.
type logStore struct {
	mu     sync.Mutex
	data   map[string]map[string]string
	buf    []byte        // appended, not yet written
	synced chan struct{} // closed once buf's writes are durable
	err    error         // the last sync's
	kick   chan struct{}
}

func openLog(dir string) (*logStore, error) {
	f, err := os.OpenFile(filepath.Join(dir, "appendonly.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	l := &logStore{data: map[string]map[string]string{}, synced: make(chan struct{}), kick: make(chan struct{}, 1)}
	go l.syncLoop(f)
	return l, nil
}

// syncLoop writes and syncs what has gathered, then wakes exactly the
// writers whose records that sync covered.
func (l *logStore) syncLoop(f *os.File) {
	var out []byte
	for range l.kick {
		l.mu.Lock()
		out, l.buf = l.buf, out[:0]
		done := l.synced
		l.synced = make(chan struct{})
		l.mu.Unlock()
		_, err := f.Write(out)
		if err == nil {
			err = datasync(f)
		}
		l.mu.Lock()
		l.err = err
		l.mu.Unlock()
		close(done)
	}
}

func (l *logStore) set(triples [][3][]byte) ([]int, error) {
	added := make([]int, len(triples))
	l.mu.Lock()
	for i, t := range triples {
		h := l.data[string(t[0])]
		if h == nil {
			h = map[string]string{}
			l.data[string(t[0])] = h
		}
		if _, ok := h[string(t[1])]; !ok {
			added[i] = 1
		}
		h[string(t[1])] = string(t[2])
		l.buf = redcon.AppendArray(l.buf, 4)
		l.buf = redcon.AppendBulkString(l.buf, "HSET")
		for _, a := range t {
			l.buf = redcon.AppendBulk(l.buf, a)
		}
	}
	wait := l.synced
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default:
	}
	<-wait
	l.mu.Lock()
	err := l.err
	l.mu.Unlock()
	return added, err
}

func (l *logStore) get(key, field []byte) ([]byte, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.data[string(key)][string(field)]
	return []byte(v), ok, nil
}

// loopStore is what an event loop stores in: it stages the writes of
// one turn of the loop, and makes them durable all at once.
type loopStore interface {
	// hset stages a write and returns how many fields it added, where the
	// store can tell cheaply (else 0).
	hset(key, field, value []byte) int
	hget(key, field []byte) ([]byte, bool)
	// flush makes every staged write durable.
	flush() error
}

// loopLog is Redis's design: a map in memory and a log of the writes.
type loopLog struct {
	f    *os.File
	data map[string]map[string]string
	aof  []byte
}

func openLoopLog(dir string) (*loopLog, error) {
	f, err := os.OpenFile(filepath.Join(dir, "appendonly.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &loopLog{f: f, data: map[string]map[string]string{}}, nil
}

func (l *loopLog) hset(key, field, value []byte) int {
	h := l.data[string(key)]
	if h == nil {
		h = map[string]string{}
		l.data[string(key)] = h
	}
	_, existed := h[string(field)]
	h[string(field)] = string(value)
	l.aof = redcon.AppendArray(l.aof, 4)
	l.aof = redcon.AppendBulkString(l.aof, "HSET")
	for _, a := range [][]byte{key, field, value} {
		l.aof = redcon.AppendBulk(l.aof, a)
	}
	if existed {
		return 0
	}
	return 1
}

func (l *loopLog) hget(key, field []byte) ([]byte, bool) {
	v, ok := l.data[string(key)][string(field)]
	return []byte(v), ok
}

func (l *loopLog) flush() error {
	if len(l.aof) == 0 {
		return nil
	}
	if _, err := l.f.Write(l.aof); err != nil {
		return err
	}
	l.aof = l.aof[:0]
	return datasync(l.f)
}

// loopPebble puts a turn's writes in one Pebble batch, committed under
// Sync: one WAL record and one fsync a turn. A read sees the turn's
// staged writes, as the next command of a pipeline must.
type loopPebble struct {
	db    *pebble.DB
	batch *pebble.Batch // indexed, so that it can be read
}

func openLoopPebble(dir string) (*loopPebble, error) {
	p, err := openPebble(dir)
	if err != nil {
		return nil, err
	}
	return &loopPebble{db: p.db, batch: p.db.NewIndexedBatch()}, nil
}

func (l *loopPebble) hset(key, field, value []byte) int {
	l.batch.Set(append(append(append([]byte(nil), key...), 0), field...), value, nil)
	return 0
}

func (l *loopPebble) hget(key, field []byte) ([]byte, bool) {
	v, closer, err := l.batch.Get(append(append(append([]byte(nil), key...), 0), field...))
	if err != nil {
		return nil, false
	}
	defer closer.Close()
	return append([]byte(nil), v...), true
}

func (l *loopPebble) flush() error {
	if l.batch.Empty() {
		return nil
	}
	err := l.batch.Commit(pebble.Sync)
	l.batch.Close()
	l.batch = l.db.NewIndexedBatch()
	return err
}
