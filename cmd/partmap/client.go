package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"

	pmhttp "github.com/partmap/partmap/http"
)

// clientFlags are shared by every subcommand that talks to a server.
type clientFlags struct {
	fs     *flag.FlagSet
	server string
}

// newClientCommand starts the flag set of a client subcommand.
func newClientCommand(e *env, name, args string) *clientFlags {
	cf := &clientFlags{fs: newFlagSet(e, name, args)}
	def := e.getenv("PARTMAP_SERVER")
	if def == "" {
		def = "http://127.0.0.1:8080"
	}
	cf.fs.StringVar(&cf.server, "server", def, "partmap server `URL`; $PARTMAP_SERVER sets the default")
	return cf
}

// parse parses args, checks the number of positional arguments, and returns
// them with a client for the server.
func (cf *clientFlags) parse(args []string, minArgs, maxArgs int) ([]string, *pmhttp.Client, error) {
	rest, err := parseFlags(cf.fs, args)
	if err != nil {
		return nil, nil, err
	}
	if len(rest) < minArgs || len(rest) > maxArgs {
		cf.fs.Usage()
		return nil, nil, errUsageReported
	}
	cl, err := pmhttp.NewClient(cf.server, nil)
	if err != nil {
		return nil, nil, usageError(err.Error())
	}
	return rest, cl, nil
}

func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
