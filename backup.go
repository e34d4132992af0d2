package partmap

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// Backuper is a store that can copy itself, consistently, while it keeps
// serving reads and writes: the embedded store does, from a Pebble
// checkpoint. A store kept by another system (Redis) is backed up by that
// system's own persistence, and is not a Backuper.
type Backuper interface {
	// Backup writes a copy of the whole store, as it was at one instant, to
	// w: a tar archive of a data directory that the store opens as it is,
	// ending with BackupManifest. It blocks no writer.
	Backup(ctx context.Context, w io.Writer) (BackupInfo, error)
}

// BackupManifest is the name of a backup archive's last entry: its
// BackupInfo as JSON. An archive without it is incomplete.
const BackupManifest = "partmap-backup.json"

// BackupInfo describes a backup.
type BackupInfo struct {
	Taken int64 `json:"taken"` // Unix ms when its instant was
	Files int   `json:"files"` // the data files archived before the manifest
	Bytes int64 `json:"bytes"` // their size
	// Contents lists every data file, in archive order. A backup made
	// before partmap recorded it has only Files and Bytes, which Check
	// then compares; nothing can tell an altered file of the right size.
	Contents []BackupFile `json:"contents,omitempty"`
	// Feed is a change feed cursor (Feeder) from before the backup's
	// instant: every change up to it is in the backup, so a consumer that
	// restores it and replays the live feed after Feed misses nothing. A
	// change after it may be in the backup too, and replays to the same
	// record. Empty for a store without a feed.
	Feed string `json:"feed,omitempty"`
}

// BackupFile is one data file of a backup.
type BackupFile struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	CRC32C uint32 `json:"crc32c"` // of its bytes, Castagnoli polynomial (hash/crc32)
}

// Checksummed reports whether the manifest lists each file with its
// checksum, as every backup since partmap recorded them does.
func (b BackupInfo) Checksummed() bool { return len(b.Contents) > 0 }

// Check compares the files found in a backup, in either form, with its
// manifest b. It is EINVALID, naming each file that is missing, extra,
// short, long or altered, or naming the manifest when it disagrees with
// itself. A manifest without Contents (an older partmap's) is checked by
// its file count and total size only.
func (b BackupInfo) Check(found []BackupFile) error {
	var listed int64
	inManifest := make(map[string]bool, len(b.Contents))
	for _, m := range b.Contents {
		listed += m.Size
		inManifest[m.Name] = true
	}
	if b.Files == 0 || b.Checksummed() && (len(b.Contents) != b.Files || len(inManifest) != b.Files || listed != b.Bytes) {
		return Errorf(EINVALID, "the backup's manifest (%s) is garbled: it counts %d files of %d bytes, and lists %d of %d",
			BackupManifest, b.Files, b.Bytes, len(b.Contents), listed)
	}
	var problems []string
	seen := make(map[string]BackupFile, len(found))
	var size int64
	for _, f := range found {
		_, twice := seen[f.Name]
		switch {
		case twice:
			problems = append(problems, f.Name+" appears twice")
		case b.Checksummed() && !inManifest[f.Name]:
			problems = append(problems, f.Name+" is not in the manifest")
		}
		seen[f.Name] = f
		size += f.Size
	}
	if !b.Checksummed() && (len(found) != b.Files || size != b.Bytes) {
		problems = append(problems, fmt.Sprintf("it holds %d files of %d bytes; its manifest says %d of %d", len(found), size, b.Files, b.Bytes))
	}
	for _, m := range b.Contents {
		f, ok := seen[m.Name]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s (%d bytes) is missing", m.Name, m.Size))
		case f.Size < m.Size:
			problems = append(problems, fmt.Sprintf("%s is short: %d of its %d bytes", m.Name, f.Size, m.Size))
		case f.Size > m.Size:
			problems = append(problems, fmt.Sprintf("%s is long: %d bytes, not %d", m.Name, f.Size, m.Size))
		case f.CRC32C != m.CRC32C:
			problems = append(problems, m.Name+" is altered: its CRC-32C is not the manifest's")
		}
	}
	if len(problems) == 0 {
		return nil
	}
	if len(problems) > 5 {
		problems = append(problems[:5], fmt.Sprintf("and %d more", len(problems)-5))
	}
	return Errorf(EINVALID, "the backup is damaged: %s", strings.Join(problems, "; "))
}
