package main

import (
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
)

// clientFlags are shared by every subcommand that talks to a server.
type clientFlags struct {
	fs     *flag.FlagSet
	stderr io.Writer
	server string
	token  string
	caCert string
	// ifMatch is --if-match, on a write; parse reads it into cond.
	ifMatch *string
	cond    partmap.Condition
}

// newClientCommand starts the flag set of a client subcommand.
func newClientCommand(e *env, name, args string) *clientFlags {
	cf := &clientFlags{fs: newFlagSet(e, name, args), stderr: e.stderr}
	def := e.getenv("PARTMAP_SERVER")
	if def == "" {
		def = "http://127.0.0.1:8080"
	}
	cf.fs.StringVar(&cf.server, "server", def, "partmap server `URL`; $PARTMAP_SERVER sets the default")
	cf.fs.StringVar(&cf.token, "token", e.getenv("PARTMAP_TOKEN"), "bearer `token` for a server with an auth file; $PARTMAP_TOKEN sets the default")
	cf.fs.StringVar(&cf.caCert, "ca-cert", e.getenv("PARTMAP_CA_CERT"), "PEM `file` of the CA that signed an https server's certificate; $PARTMAP_CA_CERT sets the default")
	return cf
}

// newWriteCommand starts the flag set of a client subcommand that writes,
// with --if-match.
func newWriteCommand(e *env, name, args string) *clientFlags {
	cf := newClientCommand(e, name, args)
	cf.ifMatch = cf.fs.String("if-match", "", "write only if the profile's ETag is this (or * : only if it exists)")
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
	if cf.ifMatch != nil {
		if cf.cond, err = ifMatchCondition(*cf.ifMatch); err != nil {
			return nil, nil, err
		}
	}
	opts := &pmhttp.ClientOptions{Token: cf.token, OnWait: func(err *partmap.Error, wait time.Duration) {
		fmt.Fprintf(cf.stderr, "partmap: waiting %v: %s\n", wait.Round(time.Second), err.Message)
	}}
	if cf.caCert != "" {
		pem, err := os.ReadFile(cf.caCert)
		if err != nil {
			return nil, nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, usagef("--ca-cert %s holds no PEM certificate", cf.caCert)
		}
		opts.RootCAs = pool
	}
	cl, err := pmhttp.NewClient(cf.server, opts)
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

// ifMatchCondition reads --if-match: an ETag, its quotes optional, or *.
func ifMatchCondition(tag string) (partmap.Condition, error) {
	switch tag {
	case "":
		return partmap.Condition{}, nil
	case "*":
		return partmap.Condition{IfExists: true}, nil
	}
	given := tag
	if !strings.HasPrefix(tag, `"`) {
		tag = `"` + tag + `"` // a shell eats the quotes of "0123456789abcdef"
	}
	v, err := partmap.ParseETag(tag)
	if err != nil {
		return partmap.Condition{}, usagef("--if-match %q is not an ETag partmap issued (16 hex digits, quotes optional) or *", given)
	}
	return partmap.IfMatch(v), nil
}
