package main

import (
	"context"
	"fmt"
)

func runDelete(ctx context.Context, e *env, args []string) error {
	cf := newClientCommand(e, "delete", "EMAIL")
	var cond conditionFlags
	cond.register(cf.fs)
	rest, cl, err := cf.parse(args, 1, 1)
	if err != nil {
		return err
	}
	c, err := cond.condition()
	if err != nil {
		return err
	}
	if err := cl.DeleteProfile(ctx, rest[0], c); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "deleted %s\n", rest[0])
	return nil
}
