package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/partmap/partmap"
)

func runIncr(ctx context.Context, e *env, args []string) error {
	cf := newWriteCommand(e, "incr", "EMAIL FIELD")
	by := cf.fs.String("by", "1", "add this `amount`: a signed 64-bit integer, or with --float a decimal")
	float := cf.fs.Bool("float", false, "add a decimal, as Redis's HINCRBYFLOAT (the field must hold a number)")
	rest, cl, err := cf.parse(args, 2, 2)
	if err != nil {
		return err
	}
	if *float {
		if err := partmap.ParseFloatIncrement(*by); err != nil {
			return usagef("--by: %s", partmap.ErrorMessage(err))
		}
		res, err := cl.Apply(ctx, partmap.Operation{Op: partmap.OpIncrementFloat, Email: rest[0], Field: rest[1], ByFloat: *by, Cond: cf.cond})
		if err != nil {
			return err
		}
		fmt.Fprintln(e.stdout, res.FloatValue)
		return nil
	}
	n, err := strconv.ParseInt(*by, 10, 64)
	if err != nil {
		return usagef("--by must be a signed 64-bit integer, not %q (add --float for a decimal)", *by)
	}
	inc, err := partmap.IncrementField(ctx, cl, rest[0], rest[1], n, cf.cond)
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, inc.Value)
	return nil
}
