package main

import (
	"context"
	"fmt"
)

func runStart(ctx context.Context, e *env, args []string) error {
	_, cl, err := newClientCommand(e, "start", "").parse(args, 0, 0)
	if err != nil {
		return err
	}
	now, err := cl.Start(ctx)
	if err != nil {
		return err
	}
	if now {
		fmt.Fprintln(e.stdout, "started")
	} else {
		fmt.Fprintln(e.stdout, "already started")
	}
	return nil
}
