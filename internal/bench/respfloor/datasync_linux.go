package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// datasync is fdatasync(2), as Redis syncs its append-only file.
func datasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
