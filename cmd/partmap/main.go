// Command partmap runs the partmap server and talks to it.
//
//	partmap serve [--addr 127.0.0.1:8080] [--data ./partmap-data]
//	partmap start | put | get | partition ...
//
// Run `partmap help` for every subcommand.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/partmap/partmap"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // the first signal asks for a graceful stop; a second one kills
	}()
	os.Exit(Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// env is what a subcommand may touch of the outside world, so that tests can
// run Main in-process.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
}

type command struct {
	summary string
	run     func(ctx context.Context, e *env, args []string) error
}

var commands = map[string]command{
	"serve":      {"run the server (an embedded Pebble store, or Redis with --store)", runServe},
	"start":      {"start the directory (idempotent)", runStart},
	"put":        {"create or replace a profile", runPut},
	"get":        {"show a profile, or some of its fields; several at once", runGet},
	"patch":      {"change, add or delete some fields of a profile", runPatch},
	"incr":       {"add to an integer field atomically (--float: a decimal, as HINCRBYFLOAT)", runIncr},
	"expire":     {"set a deadline on a profile or some of its fields (as EXPIRE and HEXPIRE)", runOperation("expire")},
	"ttl":        {"show when a profile and some of its fields expire (as TTL and HTTL)", runTTL},
	"persist":    {"remove the deadline of a profile or some of its fields (as PERSIST and HPERSIST)", runOperation("persist")},
	"setnx":      {"set a field only if the profile lacks it; creates a missing profile (as HSETNX)", runOperation("setnx")},
	"getdel":     {"show some fields and delete them (as HGETDEL)", runOperation("getdel")},
	"getex":      {"show some fields and set or remove their deadlines (as HGETEX)", runOperation("getex")},
	"setex":      {"set fields with a deadline and conditions; creates a missing profile (as HSETEX)", runOperation("setex")},
	"delete":     {"delete a profile", runDelete},
	"rename":     {"move a profile to another email, atomically", runRename},
	"tx":         {"apply several operations to any profiles, all or none (JSON Lines)", runTx},
	"list":       {"list every profile, partition by partition", runList},
	"partitions": {"show the partitions in use and their sizes", runPartitions},
	"stats":      {"summarise partition sizes, with a histogram (--plot FILE for SVG or PNG)", runStats},
	"token":      {"make a bearer token and its auth-file line", runToken},
	"import":     {"import profiles from a JSON Lines or CSV file, validating first", runImport},
	"search":     {"search profiles through an index in the Redis query syntax (or by FIELD=VALUE equality)", runSearch},
	"index":      {"create, list and drop search indexes (as FT.CREATE, FT._LIST and FT.DROPINDEX)", runIndex},
	"check":      {"verify that every partition's count and indexes agree with its profiles", runCheck},
	"resize":     {"rehash every profile into another partition count, online", runResize},
	"map-lock":   {"hold every partition lock for bulk maintenance (writers get lock conflicts)", runMapLock},
	"map-unlock": {"release a map-lock early", runMapUnlock},
	"export":     {"write every profile as JSON Lines, from one consistent snapshot", runExport},
	"watch":      {"print the change feed as it comes, one change per line, following it until interrupted", runWatch},
	"backup":     {"copy a serving embedded store, consistently, into a new directory", runBackup},
	"restore":    {"bring a backup back as a new data directory, or check it (--verify)", runRestore},
	"bench":      {"measure throughput and latency of partmap (and a ceiling and a baseline)", runBench},
	"partition":  {"show the canonical email, hash and partition of emails", runPartition},
	"project":    {"keep a PostgreSQL table equal to the directory, following its change feed", runProject},
}

// Main runs the partmap command line and returns the exit code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv}
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		return exitOK
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "partmap: unknown command %q\n\n", args[0])
		usage(stderr)
		return exitUsage
	}
	err := cmd.run(ctx, e, args[1:])
	var uerr usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errUsageReported):
		return exitUsage
	case errors.Is(err, errAlreadyReported):
		return exitError
	case errors.As(err, &uerr):
		fmt.Fprintf(stderr, "partmap %s: %s\n", args[0], uerr)
		return exitUsage
	}
	fmt.Fprintf(stderr, "partmap %s: %s\n", args[0], describe(err))
	if partmap.ErrorCode(err) == partmap.EUNAUTHORIZED {
		fmt.Fprintf(stderr, "partmap %s: give a token with --token or $PARTMAP_TOKEN (partmap token makes one)\n", args[0])
	}
	return exitError
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: partmap COMMAND [flags] [args]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %-10s %s\n", name, commands[name].summary)
	}
	fmt.Fprintln(w, "\nRun `partmap COMMAND --help` for a command's flags.")
}

// usageError is a mistake in the command line itself.
type usageError string

func (u usageError) Error() string { return string(u) }

// errUsageReported is a usage error the flag package has already printed.
var errUsageReported = errors.New("usage error reported")

// errAlreadyReported is a failure the subcommand has already explained.
var errAlreadyReported = errors.New("failure reported")

func usagef(format string, args ...any) error { return usageError(fmt.Sprintf(format, args...)) }

// describe renders an error for a person: partmap errors by code and message,
// anything else (a refused connection, say) as it is.
func describe(err error) string {
	var perr *partmap.Error
	if errors.As(err, &perr) {
		return fmt.Sprintf("%s (%s)", partmap.ErrorMessage(perr), perr.Code)
	}
	return err.Error()
}

// parseFlags parses flags that may come before, between or after the
// positional arguments, and returns the positional ones. After --, every
// argument is positional, even one that starts with a dash.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, errUsageReported
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		if used := len(args) - fs.NArg(); used > 0 && args[used-1] == "--" {
			return append(positional, fs.Args()...), nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// isTerminal reports whether w is a terminal, where progress bars are drawn.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func newFlagSet(e *env, name, args string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: partmap %s [flags] %s\n\nflags:\n", name, args)
		fs.PrintDefaults()
	}
	return fs
}

// flagGiven says whether the flag name was on the command line, even set
// to its default value.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// count is n of noun, in the singular for one: "1 profile", "2 profiles".
func count[N int | int64](n N, noun string) string {
	switch {
	case n == 1:
		return "1 " + noun
	case strings.HasSuffix(noun, "x"):
		return fmt.Sprintf("%d %ses", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
