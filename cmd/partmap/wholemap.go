package main

import (
	"context"
	"fmt"
	"time"

	"github.com/partmap/partmap"
)

func runMapLock(ctx context.Context, e *env, args []string) error {
	cf := newClientCommand(e, "map-lock", "")
	dur := cf.fs.Duration("for", time.Minute, fmt.Sprintf("how long to hold it, in whole seconds (at most %v); it releases itself then", partmap.MaxWholeMapLock))
	_, cl, err := cf.parse(args, 0, 0)
	if err != nil {
		return err
	}
	if *dur < time.Second || *dur%time.Second != 0 || *dur > partmap.MaxWholeMapLock {
		return usagef("--for must be whole seconds from 1s to %v", partmap.MaxWholeMapLock)
	}
	l, err := cl.LockWholeMap(ctx, *dur)
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, l.Lease)
	fmt.Fprintf(e.stderr, "every partition is locked until %s: writers get lock conflicts; release early with `partmap map-unlock %s`\n",
		l.Expires.Local().Format(time.RFC3339), l.Lease)
	return nil
}

func runMapUnlock(ctx context.Context, e *env, args []string) error {
	cf := newClientCommand(e, "map-unlock", "LEASE")
	rest, cl, err := cf.parse(args, 1, 1)
	if err != nil {
		return err
	}
	if rest[0] == "" {
		return usagef("map-unlock needs the LEASE that map-lock printed")
	}
	if err := cl.UnlockWholeMap(ctx, rest[0]); err != nil {
		return err
	}
	fmt.Fprintln(e.stderr, "released; writers go on")
	return nil
}
