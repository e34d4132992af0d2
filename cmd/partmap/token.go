package main

import (
	"context"
	"fmt"

	"github.com/partmap/partmap/auth"
)

func runToken(_ context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "token", "")
	name := fs.String("name", "", "who or what the token is for (one word; shown in 403 replies, never the token)")
	scopeName := fs.String("scope", "read", "what the token may do: read, write (includes read) or admin (includes write)")
	authFile := fs.String("auth-file", "", "append the token's line to this auth `file` (created if missing)")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("token takes no arguments")
	}
	if *name == "" {
		return usagef("--name is required: who or what the token is for")
	}
	scope, err := auth.ParseScope(*scopeName)
	if err != nil {
		return usageError(err.Error())
	}
	token, line, err := auth.NewToken(*name, scope)
	if err != nil {
		return usageError(err.Error())
	}
	if *authFile == "" {
		fmt.Fprintf(e.stderr, "add this line to the server's --auth-file:\n%s\n", line)
	} else {
		if err := auth.AppendToken(*authFile, line); err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "added %q (%s) to %s; restart the server to use it\n", *name, scope, *authFile)
	}
	fmt.Fprintln(e.stdout, token) // shown once: only its hash is kept
	return nil
}
