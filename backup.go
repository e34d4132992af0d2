package partmap

import (
	"context"
	"io"
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
	// Feed is a change feed cursor (Feeder) from before the backup's
	// instant: every change up to it is in the backup, so a consumer that
	// restores it and replays the live feed after Feed misses nothing. A
	// change after it may be in the backup too, and replays to the same
	// record. Empty for a store without a feed.
	Feed string `json:"feed,omitempty"`
}
