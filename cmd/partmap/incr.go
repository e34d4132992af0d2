package main

import (
	"context"
	"fmt"
)

func runIncr(ctx context.Context, e *env, args []string) error {
	cf := newClientCommand(e, "incr", "EMAIL FIELD")
	by := cf.fs.Int64("by", 1, "add this signed 64-bit `amount`")
	var cond conditionFlags
	cond.register(cf.fs)
	rest, cl, err := cf.parse(args, 2, 2)
	if err != nil {
		return err
	}
	c, err := cond.condition()
	if err != nil {
		return err
	}
	inc, err := cl.IncrementField(ctx, rest[0], rest[1], *by, c)
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, inc.Value)
	return nil
}
