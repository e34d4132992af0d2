package directory

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

// Schema is the newest version of the metadata and storage layout this
// code reads and writes. 2 added secondary indexes (1 has none); 3,
// written once a directory has a search index, added those.
const Schema = schemaSearch

const (
	schemaIndexes = 2
	schemaSearch  = 3
)

// metadata is the directory's persisted description of itself, which a backend
// stores as JSON bytes it does not read. The JSON names are the ones
// written since schema 1: the layout generation is spelt "version" there.
type metadata struct {
	Schema     int    `json:"schema"`
	Partitions int    `json:"partitions"` // the current generation's count
	Started    bool   `json:"started"`
	CursorKey  []byte `json:"cursorKey"` // authenticates enumeration cursors
	// Indexes are the fields with a secondary index, in a fixed order: an
	// index entry names its field by position in this list.
	Indexes []string `json:"indexes,omitempty"`
	// Generation numbers the current layout: each resize makes the next,
	// in a key space of its own.
	Generation int `json:"version,omitempty"`
	// Resize is the resize in progress, if any.
	Resize *resizeState `json:"resize,omitempty"`
	// Retired are the generations resizes replaced, until each has been
	// marked and dropped: a server that opens finishes the job.
	Retired []retiredLayout `json:"retired,omitempty"`
	// WholeMap is the whole-map lock, while an operator holds it.
	WholeMap *wholeMapLease `json:"wholeMap,omitempty"`
	// Search are the search indexes (schema 3), and Dropping those
	// dropped whose entries are still being removed.
	Search   []indexMeta    `json:"search,omitempty"`
	Dropping []droppedSlots `json:"dropping,omitempty"`
}

// Retired is a layout a resize replaced.
type retiredLayout struct {
	Generation int `json:"version"`
	Partitions int `json:"partitions"`
}

// Resize is a resize in progress: every profile is being copied into the
// next generation, of Partitions partitions. Partitions of the current
// generation below Copied have been copied; writes meanwhile go to both.
type resizeState struct {
	Partitions int `json:"partitions"`
	Generation int `json:"version"`
	Copied     int `json:"copied"`
	// Epoch counts restarts of the copy; a mover whose epoch is no longer
	// the metadata's stops, since another has started over.
	Epoch int `json:"epoch,omitempty"`
}

// current is the layout that serves reads.
func (m metadata) current() engine.Layout {
	return engine.Layout{Generation: m.Generation, Partitions: m.Partitions}
}

// next is the layout a resize copies into, or nil.
func (m metadata) next() *engine.Layout {
	if m.Resize == nil {
		return nil
	}
	return &engine.Layout{Generation: m.Resize.Generation, Partitions: m.Resize.Partitions}
}

// newMeta describes a new directory, with a fresh random cursor key.
func newMeta(partitions int, indexes []string) metadata {
	key := make([]byte, 32)
	rand.Read(key)
	return metadata{Schema: schemaIndexes, Partitions: partitions, CursorKey: key, Indexes: indexes}
}

// parseMeta reads stored metadata and checks that this code can serve it,
// as a directory of partitions partitions (0: any).
func parseMeta(raw []byte, partitions int) (metadata, error) {
	var m metadata
	if err := json.Unmarshal(raw, &m); err != nil {
		return m, fmt.Errorf("metadata is corrupt (%v); refusing to open it", err)
	}
	switch {
	case m.Schema > Schema:
		return m, fmt.Errorf("written by a newer partmap (schema %d; this one reads %d); refusing to open it", m.Schema, Schema)
	case m.Schema < 1 || m.Partitions < 1 || len(m.CursorKey) == 0:
		return m, fmt.Errorf("metadata is not partmap's; refusing to open it")
	case partitions != 0 && m.Partitions != partitions:
		return m, fmt.Errorf("it holds %d partitions but %d were expected; the partition count is part of the data, "+
			"and changing it needs a resize (partmap resize)", m.Partitions, partitions)
	}
	return m, nil
}

// readMeta reads the metadata of an opened directory.
func (d *Directory) readMeta(ctx context.Context) (metadata, error) {
	raw, err := d.engine.Meta(ctx, nil)
	if err != nil {
		return metadata{}, err
	}
	if raw == nil {
		return metadata{}, fmt.Errorf("the directory's metadata is gone")
	}
	return parseMeta(raw, 0)
}

// updateMeta applies fn to the metadata and stores the result, atomically.
func (d *Directory) updateMeta(ctx context.Context, fn func(*metadata) error) (metadata, error) {
	var out metadata
	_, err := d.engine.Meta(ctx, func(old []byte) ([]byte, error) {
		m, err := parseMeta(old, 0)
		if err != nil {
			return nil, err
		}
		if err := fn(&m); err != nil {
			return nil, err
		}
		out = m
		return json.Marshal(m)
	})
	return out, err
}

// chooseIndexes decides a directory's indexed fields. A new directory
// takes want, or partmap.DefaultIndexes when want is nil; an existing one
// keeps the fields it was created with, and refuses a want that differs,
// because its entries were built for those.
func chooseIndexes(want []string, fresh bool, stored []string) ([]string, error) {
	if want != nil {
		if err := partmap.CheckIndexes(want); err != nil {
			return nil, err
		}
	}
	if fresh {
		if want == nil {
			return slices.Clone(partmap.DefaultIndexes), nil
		}
		return slices.Clone(want), nil
	}
	if want != nil && !slices.Equal(sortedCopy(want), sortedCopy(stored)) {
		return nil, fmt.Errorf("the directory indexes [%s], not [%s]; the indexed fields are chosen when a directory is created "+
			"(to change them, export and import into a new directory)", strings.Join(stored, ","), strings.Join(want, ","))
	}
	return stored, nil
}

func sortedCopy(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
