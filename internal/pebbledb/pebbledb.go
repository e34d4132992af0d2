// Package pebbledb holds what the stores built on Pebble (partmap's own and
// the bucket baseline) share: the directory's metadata under one key, and
// the durable commit that lets writers share fsyncs.
package pebbledb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/partmap/partmap/internal/engine"
)

// Key is where the metadata lives.
var Key = []byte("m")

// Store reads and writes the metadata of one database.
type Store struct {
	DB      *pebble.DB
	startMu sync.Mutex
}

// Read returns the metadata; ok is false when there is none.
func (s *Store) Read() (meta engine.Meta, ok bool, err error) {
	v, closer, err := s.DB.Get(Key)
	if errors.Is(err, pebble.ErrNotFound) {
		return meta, false, nil
	}
	if err != nil {
		return meta, false, err
	}
	defer closer.Close()
	if err := json.Unmarshal(v, &meta); err != nil {
		return meta, false, fmt.Errorf("metadata is corrupt (%v); refusing to open it", err)
	}
	return meta, true, nil
}

// Write replaces the metadata, durably.
func (s *Store) Write(meta engine.Meta) error {
	v, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	return s.DB.Set(Key, v, pebble.Sync)
}

// Meta is directory.Backend's Meta.
func (s *Store) Meta(context.Context) (engine.Meta, error) {
	meta, _, err := s.Read()
	return meta, err
}

// Start is directory.Backend's Start: it persists started=true once.
func (s *Store) Start(context.Context) (bool, error) {
	now := false
	_, err := s.Update(func(meta *engine.Meta) error {
		now = !meta.Started
		meta.Started = true
		return nil
	})
	return now && err == nil, err
}

// Update applies fn to the metadata and writes it back durably; updates
// are serialised, so none is lost.
func (s *Store) Update(fn func(*engine.Meta) error) (engine.Meta, error) {
	s.startMu.Lock()
	defer s.startMu.Unlock()
	meta, _, err := s.Read()
	if err != nil {
		return meta, err
	}
	if err := fn(&meta); err != nil {
		return meta, err
	}
	return meta, s.Write(meta)
}

// Commit applies batch and returns once it is visible; the returned wait
// blocks until it is durable. Between the two the engine releases the
// partition lock, so that the next writer can join the same WAL fsync
// instead of queueing behind it.
func Commit(db *pebble.DB, batch *pebble.Batch) (wait func() error, err error) {
	if err := db.ApplyNoSyncWait(batch, pebble.Sync); err != nil {
		batch.Close()
		return nil, err
	}
	return func() error {
		defer batch.Close()
		return batch.SyncWait()
	}, nil
}
