package main

import (
	"context"
	"fmt"
	"io"

	"github.com/partmap/partmap"
)

// deleteFlag collects repeated --delete NAME flags.
type deleteFlag []string

func (d *deleteFlag) String() string     { return "" }
func (d *deleteFlag) Set(s string) error { *d = append(*d, s); return nil }

func runPatch(ctx context.Context, e *env, args []string) error {
	cf := newWriteCommand(e, "patch", "EMAIL [--set NAME=VALUE]... [--delete NAME]...   (or a merge patch on stdin)")
	sets := fieldFlag{}
	var deletes deleteFlag
	cf.fs.Var(sets, "set", "set a field, as `NAME=VALUE`; repeat for more")
	cf.fs.Var(&deletes, "delete", "delete a field `NAME`; repeat for more")
	rest, cl, err := cf.parse(args, 1, 1)
	if err != nil {
		return err
	}
	patch := partmap.Patch{}
	if len(sets) == 0 && len(deletes) == 0 {
		data, err := io.ReadAll(e.stdin)
		if err != nil {
			return err
		}
		if patch, err = partmap.ParsePatchJSON(data); err != nil {
			return err
		}
	}
	for name, v := range sets {
		patch[name] = &v
	}
	for _, name := range deletes {
		if _, dup := patch[name]; dup {
			return usagef("field %q is both set and deleted", name)
		}
		patch[name] = nil
	}
	res, err := partmap.PatchProfile(ctx, cl, rest[0], patch, cf.cond)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "patched %s: %s added, %d deleted (ETag %s)\n",
		res.Record.Profile.Email(), count(res.FieldsAdded, "field"), res.FieldsDeleted, res.Record.Version.ETag())
	return printJSON(e.stdout, res.Record.Profile)
}
