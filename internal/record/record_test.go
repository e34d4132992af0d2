package record

import (
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"runtime"
	"testing"

	"github.com/partmap/partmap"
)

func TestCodec(t *testing.T) {
	for _, rec := range []partmap.Record{
		{Profile: partmap.Profile{}, Version: 1},
		{Profile: partmap.Profile{"emailAddress": "a@b", "": "", "name.first": "A中🙂", "z": "\x00\n"}, Version: 1<<64 - 1},
		{Profile: partmap.Profile{"emailAddress": "a@b", "x": "1"}, Version: 7, Deadlines: partmap.Deadlines{Profile: math.MaxInt64}},
		{Profile: partmap.Profile{"emailAddress": "a@b", "x": "1", "y": ""}, Version: 7,
			Deadlines: partmap.Deadlines{Fields: map[string]int64{"x": 1, "y": 1764547200000}}},
		{Profile: partmap.Profile{"emailAddress": "a@b"}, Version: 3, Committed: 1764547200123},
		{Profile: partmap.Profile{"emailAddress": "a@b", "x": "1"}, Version: 3, Committed: 1,
			Deadlines: partmap.Deadlines{Profile: 9, Fields: map[string]int64{"x": 1764547200000}}},
	} {
		got, err := Decode(Encode(rec))
		if err != nil || got.Version != rec.Version || len(got.Profile) != len(rec.Profile) {
			t.Fatalf("round trip of %v: %v, %v", rec, got, err)
		}
		if !reflect.DeepEqual(got.Deadlines, rec.Deadlines) || got.Committed != rec.Committed {
			t.Fatalf("deadlines and commit time: got %+v %d, want %+v %d", got.Deadlines, got.Committed, rec.Deadlines, rec.Committed)
		}
		for k, v := range rec.Profile {
			if got.Profile[k] != v {
				t.Fatalf("field %q: got %q, want %q", k, got.Profile[k], v)
			}
		}
		b := Encode(rec)
		fieldsEnd := len(Encode(partmap.Record{Profile: rec.Profile, Version: rec.Version}))
		deadlinesEnd := len(Encode(partmap.Record{Profile: rec.Profile, Version: rec.Version, Deadlines: rec.Deadlines}))
		for cut := range len(b) {
			if cut == fieldsEnd || cut == deadlinesEnd {
				continue // a record without deadlines, or without its commit time, ends there
			}
			if _, err := Decode(b[:cut]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("truncated at %d of %d: got %v, want ErrCorrupt", cut, len(b), err)
			}
		}
		if _, err := Decode(append(b, 0)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("trailing byte: got %v, want ErrCorrupt", err)
		}
		if rec.Committed != 0 {
			// What a backend stamps as it commits is what Encode writes.
			without := rec
			without.Committed = 0
			if got := AppendCommitted(Encode(without), rec.Committed); !reflect.DeepEqual(got, b) {
				t.Fatalf("AppendCommitted: %x, Encode: %x", got, b)
			}
		}
	}
}

// A corrupt field count is refused before anything is allocated for it.
func TestDecodeHugeCountAllocatesNothing(t *testing.T) {
	b := binary.AppendUvarint(make([]byte, 8), 1<<26)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := Decode(b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v, want ErrCorrupt", err)
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Fatalf("allocated %d bytes for a corrupt count", alloc)
	}
}

// The string reader parses lengths exactly as binary.Uvarint does, and
// refuses what it refuses.
func TestReadStringAgreesWithUvarint(t *testing.T) {
	cases := [][]byte{
		{}, {0x80}, {0x05, 'a'}, {0x01, 'a', 'b'},
		binary.AppendUvarint(nil, 1<<40),
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},       // 2^64-1
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02},       // overflows
		{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, // too long
	}
	for _, b := range cases {
		n, w := binary.Uvarint(b)
		want := w > 0 && n <= uint64(len(b)-w)
		value, rest, ok := readString(string(b))
		if ok != want {
			t.Fatalf("%x: ok %v, binary.Uvarint says %v", b, ok, want)
		}
		if ok && (value != string(b[w:w+int(n)]) || rest != string(b[w+int(n):])) {
			t.Fatalf("%x: got %q %q", b, value, rest)
		}
	}
}

// Decode never panics on any bytes, and what it accepts encodes back to
// bytes that decode to the same record.
func FuzzDecode(f *testing.F) {
	f.Add(Encode(partmap.Record{Profile: partmap.Profile{"emailAddress": "a@b"}, Version: 3}))
	f.Add(Encode(partmap.Record{Profile: partmap.Profile{"emailAddress": "a@b", "x": "1"}, Version: 3,
		Deadlines: partmap.Deadlines{Profile: 5, Fields: map[string]int64{"x": 9}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := Decode(b)
		if err != nil {
			return
		}
		again, err := Decode(Encode(rec))
		if err != nil || !reflect.DeepEqual(again, rec) {
			t.Fatalf("%x decodes to %+v, which re-encodes to %+v (%v)", b, rec, again, err)
		}
	})
}

func TestEventCodec(t *testing.T) {
	rec := &partmap.Record{Version: 7, Profile: partmap.Profile{"emailAddress": "a@b.c", "tier": "gold"}, Deadlines: partmap.Deadlines{Profile: 99}}
	for _, c := range []struct {
		op  partmap.OpKind
		rec *partmap.Record
	}{{partmap.OpPut, rec}, {partmap.OpDelete, nil}, {partmap.OpExpired, &partmap.Record{Version: 1, Profile: partmap.Profile{}}}} {
		b := AppendEvent(nil, 1234567890123, c.op, "a@b.c", encoded(c.rec))
		ms, op, email, got, err := DecodeEvent(b)
		if err != nil || ms != 1234567890123 || op != c.op || email != "a@b.c" || !reflect.DeepEqual(got, c.rec) {
			t.Fatalf("%s: got %d %q %q %+v %v", c.op, ms, op, email, got, err)
		}
		head := len(b) - len(AppendEvent(nil, 0, "", "", encoded(c.rec))) + 3 // time, op, email and tag
		for i := range head {                                                 // a truncated head is refused, never misread
			if _, _, _, _, err := DecodeEvent(b[:i]); err == nil {
				t.Fatalf("%s: %d of %d bytes decoded", c.op, i, len(b))
			}
		}
	}
}

func FuzzDecodeEvent(f *testing.F) {
	f.Add(AppendEvent(nil, 1, partmap.OpPatch, "x@y.z", Encode(partmap.Record{Version: 3, Profile: partmap.Profile{"a": "b"}})))
	f.Add(AppendEvent(nil, 2, partmap.OpDelete, "x@y.z", nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, op, email, rec, err := DecodeEvent(b)
		if err != nil {
			return
		}
		if again := AppendEvent(nil, ms, op, email, encoded(rec)); !reflect.DeepEqual(again, b) {
			// Encodings are canonical but for uvarint padding; decode again to compare.
			ms2, op2, email2, rec2, err := DecodeEvent(again)
			if err != nil || ms2 != ms || op2 != op || email2 != email || !reflect.DeepEqual(rec2, rec) {
				t.Fatalf("re-encoding changed the event")
			}
		}
	})
}

func encoded(rec *partmap.Record) []byte {
	if rec == nil {
		return nil
	}
	return Encode(*rec)
}

// The commit time's cost: a typical profile encoded and decoded with it
// and without it.
func BenchmarkCodec(b *testing.B) {
	p := partmap.Profile{partmap.FieldEmail: "bench@example.com", "fullName": "Bench User", "companyName": "Acme Corp", "customerTier": "gold", "visits": "0"}
	for _, c := range []struct {
		name string
		ms   int64
	}{{"committed=no", 0}, {"committed=yes", 1764547200123}} {
		rec := partmap.Record{Profile: p, Version: 7, Committed: c.ms}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Decode(Encode(rec)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(Encode(rec))), "bytes/record")
		})
	}
}

// A deadline is any int64 of Unix ms at or after the epoch: a uvarint past
// int64 is corrupt.
func TestDecodeRefusesDeadlinePastInt64(t *testing.T) {
	for _, d := range []partmap.Deadlines{{Profile: -1}, {Profile: math.MinInt64}, {Fields: map[string]int64{"x": -1}}} {
		rec := partmap.Record{Profile: partmap.Profile{"emailAddress": "a@b", "x": "1"}, Version: 1, Deadlines: d}
		if got, err := Decode(Encode(rec)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("deadlines %+v: decoded %+v, %v; want ErrCorrupt", d, got.Deadlines, err)
		}
	}
}
