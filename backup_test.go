package partmap_test

import (
	"strings"
	"testing"

	"github.com/partmap/partmap"
)

// Check is the one comparison of a backup with its manifest, for both of
// its forms (a directory and an archive): each kind of damage is refused,
// naming the file.
func TestBackupInfoCheck(t *testing.T) {
	a, b := partmap.BackupFile{Name: "a.sst", Size: 10, CRC32C: 1}, partmap.BackupFile{Name: "b.log", Size: 20, CRC32C: 2}
	manifest := partmap.BackupInfo{Taken: 1, Files: 2, Bytes: 30, Contents: []partmap.BackupFile{a, b}}
	older := partmap.BackupInfo{Taken: 1, Files: 2, Bytes: 30} // a manifest from before Contents
	with := func(f partmap.BackupFile, change func(*partmap.BackupFile)) partmap.BackupFile {
		change(&f)
		return f
	}
	many := []partmap.BackupFile{a, b}
	for _, name := range []string{"c", "d", "e", "f", "g", "h"} {
		many = append(many, partmap.BackupFile{Name: name})
	}
	for _, c := range []struct {
		name     string
		manifest partmap.BackupInfo
		found    []partmap.BackupFile
		want     string // in the error; "" for none
	}{
		{"OK", manifest, []partmap.BackupFile{a, b}, ""},
		{"OKInAnyOrder", manifest, []partmap.BackupFile{b, a}, ""},
		{"ErrMissing", manifest, []partmap.BackupFile{a}, "b.log (20 bytes) is missing"},
		{"ErrExtra", manifest, []partmap.BackupFile{a, b, {Name: "c.sst", Size: 1}}, "c.sst is not in the manifest"},
		{"ErrShort", manifest, []partmap.BackupFile{a, with(b, func(f *partmap.BackupFile) { f.Size = 10 })}, "b.log is short: 10 of its 20 bytes"},
		{"ErrLong", manifest, []partmap.BackupFile{a, with(b, func(f *partmap.BackupFile) { f.Size = 21 })}, "b.log is long: 21 bytes, not 20"},
		{"ErrAltered", manifest, []partmap.BackupFile{with(a, func(f *partmap.BackupFile) { f.CRC32C = 7 }), b}, "a.sst is altered"},
		{"ErrTwice", manifest, []partmap.BackupFile{a, a, b}, "a.sst appears twice"},
		{"ErrEveryProblem", manifest, []partmap.BackupFile{{Name: "c.sst"}, with(a, func(f *partmap.BackupFile) { f.Size = 1 })}, "c.sst is not in the manifest; a.sst is short: 1 of its 10 bytes; b.log (20 bytes) is missing"},
		{"ErrAtMostFive", manifest, many, "g is not in the manifest; and 1 more"},
		{"ErrManifestEmpty", partmap.BackupInfo{}, nil, "manifest (partmap-backup.json) is garbled"},
		{"ErrManifestMiscounts", partmap.BackupInfo{Files: 3, Bytes: 30, Contents: manifest.Contents}, []partmap.BackupFile{a, b}, "is garbled: it counts 3 files of 30 bytes, and lists 2 of 30"},
		{"ErrManifestMisadds", partmap.BackupInfo{Files: 2, Bytes: 31, Contents: manifest.Contents}, []partmap.BackupFile{a, b}, "is garbled"},
		{"ErrManifestListsTwice", partmap.BackupInfo{Files: 2, Bytes: 20, Contents: []partmap.BackupFile{a, a}}, []partmap.BackupFile{a, a}, "is garbled"},
		// An older manifest: the count and the total, and nothing finer.
		{"OlderOK", older, []partmap.BackupFile{with(a, func(f *partmap.BackupFile) { f.CRC32C = 7 }), b}, ""},
		{"OlderErrMissing", older, []partmap.BackupFile{a}, "it holds 1 files of 10 bytes; its manifest says 2 of 30"},
		{"OlderErrShort", older, []partmap.BackupFile{a, with(b, func(f *partmap.BackupFile) { f.Size = 10 })}, "it holds 2 files of 20 bytes; its manifest says 2 of 30"},
		{"OlderErrExtra", older, []partmap.BackupFile{a, b, {Name: "c"}}, "it holds 3 files of 30 bytes"},
		{"OlderErrTwice", older, []partmap.BackupFile{b, b}, "b.log appears twice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.manifest.Check(c.found)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case c.want == "":
			case partmap.ErrorCode(err) != partmap.EINVALID || !strings.Contains(partmap.ErrorMessage(err), c.want):
				t.Fatalf("got %v, want invalid with %q", err, c.want)
			}
		})
	}
	if !manifest.Checksummed() || older.Checksummed() {
		t.Errorf("Checksummed: %v for a manifest with contents, %v for one without", manifest.Checksummed(), older.Checksummed())
	}
}
