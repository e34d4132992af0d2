package pebble_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/pebble"
)

// A backup taken while writers run is one instant of the directory: every
// counter in it is at least what was acknowledged before the backup began
// and at most what was written by its end, each partition's count and
// index entries agree with its profiles, and the restored directory
// serves. Transfers between two counters keep their sum, so an instant
// that split a transaction would show.
func TestBackupUnderWriters(t *testing.T) {
	ctx := context.Background()
	s := pebble.MustStart(t, nil)
	const writers, total = 8, 1000
	email := func(w int) string { return fmt.Sprintf("writer%d@example.com", w) }
	for w := range writers {
		p := partmap.Profile{"emailAddress": email(w), "n": "0", "balance": strconv.Itoa(total), "customerTier": "gold"}
		if _, _, err := partmap.UpsertProfile(ctx, s, p, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
	var acked [writers]atomic.Int64 // increments acknowledged
	var sent [writers]atomic.Int64  // increments sent
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				sent[w].Add(1)
				if _, err := partmap.IncrementField(ctx, s, email(w), "n", 1, partmap.Condition{}); err != nil {
					t.Error(err)
					return
				}
				acked[w].Add(1)
				// A transfer to the next writer's balance: all or nothing.
				_, err := s.Transact(ctx, []partmap.Operation{
					{Op: partmap.OpIncrement, Email: email(w), Field: "balance", By: -1},
					{Op: partmap.OpIncrement, Email: email((w + 1) % writers), Field: "balance", By: 1},
				})
				if err != nil && partmap.ErrorCode(err) != partmap.ELOCKCONFLICT {
					t.Error(err)
					return
				}
			}
		}()
	}
	for acked[0].Load() < 20 {
		time.Sleep(time.Millisecond)
	}
	var before [writers]int64
	for w := range writers {
		before[w] = acked[w].Load()
	}
	var archive bytes.Buffer
	info, err := s.Backup(ctx, &archive)
	var after [writers]int64
	for w := range writers {
		after[w] = sent[w].Load()
	}
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if info.Files == 0 || info.Bytes == 0 {
		t.Fatalf("backup info %+v", info)
	}

	dir := filepath.Join(t.TempDir(), "backup")
	if _, err := pebble.Unpack(bytes.NewReader(archive.Bytes()), dir, nil); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "restored")
	got, profiles, err := pebble.Restore(ctx, pebble.BackupDir(dir), data, nil)
	if err != nil || !reflect.DeepEqual(got, info) || profiles != writers {
		t.Fatalf("restore: %+v, %d profiles, %v (backup %+v)", got, profiles, err, info)
	}
	r := pebble.MustReopen(t, data, nil)
	sum := 0
	for w := range writers {
		rec, err := r.FindProfile(ctx, email(w))
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.ParseInt(rec.Profile["n"], 10, 64)
		if n < before[w] || n > after[w] {
			t.Errorf("%s: n is %d in the backup; %d were acknowledged before it began and %d sent by its end", email(w), n, before[w], after[w])
		}
		b, _ := strconv.Atoi(rec.Profile["balance"])
		sum += b
	}
	if sum != writers*total {
		t.Errorf("the balances sum to %d in the backup, not %d: it split a transaction", sum, writers*total)
	}
	if err := r.CheckPartitions(ctx, 0, 0, func(c partmap.PartitionCheck) error {
		if !c.OK() {
			return fmt.Errorf("drift in %s: %+v", c.Partition, c)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// An archive cut short, or holding anything but data files, is refused
// and leaves nothing behind; a backup or restore never writes into a
// directory that is not empty.
func TestBackupRefusesDamage(t *testing.T) {
	ctx := context.Background()
	s := pebble.MustStart(t, nil)
	if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{"emailAddress": "a@example.com"}, partmap.Condition{}); err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	if _, err := s.Backup(ctx, &archive); err != nil {
		t.Fatal(err)
	}
	whole := archive.Bytes()
	for _, cut := range []int{0, 100, len(whole) / 2, len(whole) - 2100, len(whole) - 1600} { // the manifest is in the last 2 KiB
		dir := filepath.Join(t.TempDir(), "b")
		if _, err := pebble.Unpack(bytes.NewReader(whole[:cut]), dir, nil); err == nil {
			t.Fatalf("an archive cut at %d of %d bytes was taken", cut, len(whole))
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("an archive cut at %d left %s behind (%v)", cut, dir, err)
		}
	}
	var evil bytes.Buffer
	tw := tar.NewWriter(&evil)
	tw.WriteHeader(&tar.Header{Name: "../escape", Mode: 0o644, Size: 1})
	tw.Write([]byte("x"))
	tw.Close()
	if _, err := pebble.Unpack(&evil, filepath.Join(t.TempDir(), "b"), nil); err == nil || !strings.Contains(err.Error(), "not a data file") {
		t.Fatalf("an archive with ../escape: %v", err)
	}
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "keep"), []byte("mine"), 0o644)
	if _, err := pebble.Unpack(bytes.NewReader(whole), full, nil); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("unpack into a directory that is not empty: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "b")
	if _, err := pebble.Unpack(bytes.NewReader(whole), dir, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := pebble.Restore(ctx, pebble.BackupDir(dir), full, nil); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("restore into a directory that is not empty: %v", err)
	}
	if _, _, err := pebble.Restore(ctx, pebble.BackupDir(t.TempDir()), filepath.Join(t.TempDir(), "d"), nil); err == nil || !strings.Contains(err.Error(), "not a partmap backup") {
		t.Fatalf("restore of a directory that is no backup: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(full, "keep")); err != nil || string(b) != "mine" {
		t.Fatal("a refused restore touched the directory")
	}
}

// backupEntry is one entry of a backup archive.
type backupEntry struct {
	name string
	body []byte
}

func readArchive(t *testing.T, archive []byte) []backupEntry {
	t.Helper()
	var entries []backupEntry
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return entries
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, backupEntry{hdr.Name, body})
	}
}

// The two forms of a backup: the archive, and the directory Unpack makes.
var backupForms = []struct {
	name   string
	source func(t *testing.T, entries []backupEntry) pebble.BackupSource
}{
	{"Dir", func(t *testing.T, entries []backupEntry) pebble.BackupSource {
		dir := t.TempDir()
		for _, e := range entries {
			if err := os.WriteFile(filepath.Join(dir, e.name), e.body, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return pebble.BackupDir(dir)
	}},
	{"Archive", func(t *testing.T, entries []backupEntry) pebble.BackupSource {
		return pebble.BackupArchive(writeArchive(entries))
	}},
}

func writeArchive(entries []backupEntry) *bytes.Buffer {
	var archive bytes.Buffer
	tw := tar.NewWriter(&archive)
	for _, e := range entries {
		tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body))})
		tw.Write(e.body)
	}
	tw.Close()
	return &archive
}

// storeBackup backs up a store of n profiles and returns its archive's
// entries, the manifest last, and the index of its newest WAL.
func storeBackup(t *testing.T, n int) ([]backupEntry, int) {
	t.Helper()
	ctx := context.Background()
	s := pebble.MustStart(t, nil)
	var ps []partmap.Profile
	for i := range n {
		ps = append(ps, partmap.Profile{"emailAddress": fmt.Sprintf("p%d@example.com", i), "fullName": fmt.Sprintf("Person %d", i)})
	}
	if _, err := s.UpsertProfiles(ctx, ps); err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	if _, err := s.Backup(ctx, &archive); err != nil {
		t.Fatal(err)
	}
	entries := readArchive(t, archive.Bytes())
	wal := -1
	for i, e := range entries {
		if strings.HasSuffix(e.name, ".log") {
			wal = i // in name order, which is Pebble's
		}
	}
	if wal < 0 || entries[len(entries)-1].name != partmap.BackupManifest {
		t.Fatalf("the backup holds %d entries, WAL at %d", len(entries), wal)
	}
	return entries, wal
}

// Every kind of damage, to a data file or to the manifest, is refused in
// both forms of a backup, by Verify, Restore and Unpack alike, naming the
// file; a refused Restore or Unpack leaves nothing behind, not even the
// directories it made.
func TestBackupRefusesEveryDamage(t *testing.T) {
	ctx := context.Background()
	sound, wal := storeBackup(t, 500)
	manifest := len(sound) - 1
	walName := sound[wal].name
	damaged := func(change func(entries []backupEntry) []backupEntry) []backupEntry {
		entries := slices.Clone(sound)
		for i := range entries {
			entries[i].body = slices.Clone(entries[i].body)
		}
		return change(entries)
	}
	cases := []struct {
		name, want string
		entries    []backupEntry
	}{
		{"ErrMissing", walName + " (", damaged(func(es []backupEntry) []backupEntry { return slices.Delete(es, wal, wal+1) })},
		{"ErrExtra", "999999.sst is not in the manifest", damaged(func(es []backupEntry) []backupEntry {
			return slices.Insert(es, manifest, backupEntry{"999999.sst", []byte("stray")})
		})},
		{"ErrShort", walName + " is short", damaged(func(es []backupEntry) []backupEntry {
			es[wal].body = es[wal].body[:len(es[wal].body)/2]
			return es
		})},
		{"ErrLong", walName + " is long", damaged(func(es []backupEntry) []backupEntry {
			es[wal].body = append(es[wal].body, 0)
			return es
		})},
		{"ErrAltered", walName + " is altered", damaged(func(es []backupEntry) []backupEntry {
			es[wal].body[len(es[wal].body)/2] ^= 1
			return es
		})},
		{"ErrNoManifest", partmap.BackupManifest, damaged(func(es []backupEntry) []backupEntry { return es[:manifest] })},
		{"ErrGarbledManifest", "manifest (" + partmap.BackupManifest + ") is garbled", damaged(func(es []backupEntry) []backupEntry {
			es[manifest].body = es[manifest].body[:len(es[manifest].body)/2]
			return es
		})},
	}
	for _, form := range backupForms {
		t.Run("OK/"+form.name, func(t *testing.T) {
			if _, err := pebble.Verify(form.source(t, sound), nil); err != nil {
				t.Fatal(err)
			}
			if _, profiles, err := pebble.Restore(ctx, form.source(t, sound), filepath.Join(t.TempDir(), "data"), nil); err != nil || profiles != 500 {
				t.Fatalf("restore: %d profiles, %v", profiles, err)
			}
		})
		for _, c := range cases {
			t.Run(c.name+"/"+form.name, func(t *testing.T) {
				refused := func(what string, err error) {
					t.Helper()
					if partmap.ErrorCode(err) != partmap.EINVALID || !strings.Contains(partmap.ErrorMessage(err), c.want) {
						t.Errorf("%s: got %v, want invalid with %q", what, err, c.want)
					}
				}
				_, err := pebble.Verify(form.source(t, c.entries), nil)
				refused("verify", err)
				parent := filepath.Join(t.TempDir(), "new")
				_, _, err = pebble.Restore(ctx, form.source(t, c.entries), filepath.Join(parent, "data"), nil)
				refused("restore", err)
				if _, err := os.Stat(parent); !os.IsNotExist(err) {
					t.Errorf("a refused restore left %s behind (%v)", parent, err)
				}
				empty := t.TempDir()
				_, _, err = pebble.Restore(ctx, form.source(t, c.entries), empty, nil)
				refused("restore into an empty directory", err)
				if entries, err := os.ReadDir(empty); err != nil || len(entries) != 0 {
					t.Errorf("a refused restore into an empty directory left %d files (%v)", len(entries), err)
				}
				if form.name == "Archive" {
					_, err := pebble.Unpack(writeArchive(c.entries), filepath.Join(parent, "backup"), nil)
					refused("unpack", err)
					if _, err := os.Stat(parent); !os.IsNotExist(err) {
						t.Errorf("a refused unpack left %s behind (%v)", parent, err)
					}
				}
			})
		}
	}
	// Only an archive has an order: nothing may follow its manifest.
	after := append(slices.Clone(sound), backupEntry{"999999.sst", []byte("stray")})
	if _, err := pebble.Verify(pebble.BackupArchive(writeArchive(after)), nil); partmap.ErrorCode(err) != partmap.EINVALID ||
		!strings.Contains(err.Error(), "999999.sst follows its manifest") {
		t.Errorf("an entry after the manifest: %v", err)
	}
}

// A backup from an older partmap has a manifest without per-file entries:
// it is still restored, checked by its file count and total size, which
// catch a missing or a cut file, though not one altered in place.
func TestRestoreOlderBackup(t *testing.T) {
	ctx := context.Background()
	sound, wal := storeBackup(t, 500)
	var info partmap.BackupInfo
	if err := json.Unmarshal(sound[len(sound)-1].body, &info); err != nil {
		t.Fatal(err)
	}
	older, _ := json.Marshal(map[string]any{"taken": info.Taken, "files": info.Files, "bytes": info.Bytes, "feed": info.Feed})
	sound[len(sound)-1].body = older
	short := slices.Clone(sound)
	short[wal].body = short[wal].body[:len(short[wal].body)/2]
	for _, form := range backupForms {
		t.Run(form.name, func(t *testing.T) {
			got, err := pebble.Verify(form.source(t, sound), nil)
			if err != nil || got.Checksummed() || got.Files != info.Files {
				t.Fatalf("verify: %+v, %v", got, err)
			}
			if _, profiles, err := pebble.Restore(ctx, form.source(t, sound), filepath.Join(t.TempDir(), "data"), nil); err != nil || profiles != 500 {
				t.Fatalf("restore: %d profiles, %v", profiles, err)
			}
			_, _, err = pebble.Restore(ctx, form.source(t, short), filepath.Join(t.TempDir(), "data"), nil)
			if want := fmt.Sprintf("its manifest says %d of %d", info.Files, info.Bytes); !strings.Contains(fmt.Sprint(err), want) {
				t.Fatalf("restore of an older backup with a short WAL: %v, want %q", err, want)
			}
		})
	}
}

// A checkpoint that a crash left beside the data directory goes at the
// next open; another directory's is left alone.
func TestOpenRemovesStaleBackups(t *testing.T) {
	parent := t.TempDir()
	data := filepath.Join(parent, "data")
	stale := filepath.Join(parent, ".partmap-backup-data-123")
	other := filepath.Join(parent, ".partmap-backup-database-456")
	for _, dir := range []string{stale, other} {
		if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	pebble.MustReopen(t, data, nil)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("the stale checkpoint is still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("another directory's checkpoint was removed: %v", err)
	}
}
