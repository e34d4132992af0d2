package partmap

// MaxPartitions bounds a resize: partition numbers stay small, and names
// stay short (partition-1048575).
const MaxPartitions = 1 << 20

// ResizeStatus describes the directory's layout and any resize in progress.
type ResizeStatus struct {
	Partitions int // the current partition count, which serves reads
	Generation int // the layout generation; each resize makes the next
	// During a resize: the partition count being moved to, and how many of
	// the current partitions have been copied so far, of Partitions.
	Running bool
	To      int
	Copied  int
	// LastError is the mover's last failure, which it retries, if any.
	LastError string
}
