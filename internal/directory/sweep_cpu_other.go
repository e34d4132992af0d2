//go:build !linux

package directory

import "time"

// threadCPU is 0 where a thread's CPU time cannot be read alone.
func threadCPU() time.Duration { return 0 }
