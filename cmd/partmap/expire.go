package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/partmap/partmap"
)

// deadlineFlags are a deadline as the expiry commands take it: --in a
// duration from the server's clock, or --at a time.
type deadlineFlags struct {
	in, at string
}

func (f *deadlineFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.in, "in", "", "a `DURATION` from now on the server's clock (90s, 1500ms, 2h); 0 expires at once")
	fs.StringVar(&f.at, "at", "", "a `TIME`: RFC 3339 (2027-01-31T12:00:00Z) or Unix seconds; a past time expires at once")
}

// members sets the deadline's member of m: --in as milliseconds from now,
// --at as Unix milliseconds. A kind that requires a time must be given
// one.
func (f *deadlineFlags) members(m *partmap.OperationJSON) error {
	timed := f.in != "" || f.at != ""
	switch _, required := m.Op.Takes("time"); {
	case f.in != "" && f.at != "":
		return usagef("give --in or --at, not both")
	case timed && m.Persist != nil && *m.Persist:
		return usagef("give --in or --at, or --persist, not both")
	case timed && m.KeepTTL != nil && *m.KeepTTL:
		return usagef("give --in or --at, or --keep-ttl, not both")
	case f.in != "":
		d, err := time.ParseDuration(f.in)
		if err != nil || d < 0 || d%time.Millisecond != 0 {
			return usagef("--in takes a duration of whole milliseconds, not negative (90s, 1500ms), not %q", f.in)
		}
		return m.SetText("milliseconds", strconv.FormatInt(d.Milliseconds(), 10))
	case f.at != "":
		var ms int64
		if secs, err := strconv.ParseInt(f.at, 10, 64); err == nil {
			if secs < 0 || secs > math.MaxInt64/1000 {
				return usagef("--at %d is outside 0 to %d Unix seconds", secs, int64(math.MaxInt64/1000))
			}
			ms = secs * 1000
		} else if t, err := time.Parse(time.RFC3339Nano, f.at); err == nil {
			ms = t.UnixMilli()
		} else {
			return usagef("--at takes RFC 3339 (2027-01-31T12:00:00Z) or Unix seconds, not %q", f.at)
		}
		return m.SetText("atMilliseconds", strconv.FormatInt(ms, 10))
	case required:
		return usagef("give the deadline with --in or --at")
	}
	return nil
}

// expiryCodes names Redis's per-field codes for people.
func expiryCode(op partmap.OpKind, code int) string {
	switch {
	case code == partmap.ExpiryNoField:
		return "no such field"
	case code == partmap.ExpiryNone:
		return "no deadline"
	case code == partmap.ExpiryNotMet:
		return "condition not met"
	case code == partmap.ExpirySet && op == partmap.OpPersist:
		return "deadline removed"
	case code == partmap.ExpirySet:
		return "deadline set"
	case code == partmap.ExpiryDeleted:
		return "deleted"
	}
	return "?"
}

// operationCommand is a subcommand that runs one operation. Its
// arguments and flags spell the operation's members, which
// partmap.OperationJSON reads as it reads a transaction's: a flag for each
// member the kind takes, and print shows the result.
type operationCommand struct {
	op               partmap.OpKind
	args             string // the positional arguments, for the usage line
	minArgs, maxArgs int
	condition        string // the help of --condition, for a kind that takes one
	// members sets the members that the arguments after EMAIL spell.
	members func(m *partmap.OperationJSON, args []string) error
	print   func(e *env, op partmap.Operation, res partmap.OperationResult) error
}

var operationCommands = map[string]operationCommand{
	"expire": {partmap.OpExpire, "EMAIL [FIELD...]", 1, math.MaxInt,
		"set a deadline only where `NX` (there is none), XX (there is one), GT (it is later), LT (it is sooner) or \"XX LT\" (there is one and it is sooner)", fieldArgs, printCodes},
	"persist": {partmap.OpPersist, "EMAIL [FIELD...]", 1, math.MaxInt, "", fieldArgs, printCodes},
	"setnx":   {partmap.OpSetIfAbsent, "EMAIL FIELD VALUE", 3, 3, "", setArgs, printSet},
	"getdel":  {partmap.OpGetDelete, "EMAIL FIELD...", 2, math.MaxInt, "", fieldArgs, printValues},
	"getex":   {partmap.OpGetExpire, "EMAIL FIELD...", 2, math.MaxInt, "", fieldArgs, printValues},
	"setex": {partmap.OpSetFields, "EMAIL FIELD=VALUE...", 2, math.MaxInt,
		"set the fields only if `FNX` (none of them exists) or FXX (all of them exist)", setArgs, printSet},
}

// flagError words an error in a member that a flag spelled as a mistake
// in the command line, naming the flag.
func flagError(err error) error {
	flagOf := map[string]string{"milliseconds": "--in", "atMilliseconds": "--at", "condition": "--condition", "persist": "--persist", "keepTTL": "--keep-ttl"}
	var perr *partmap.Error
	if errors.As(err, &perr) && flagOf[perr.Field] != "" {
		return usagef("%s: %s", flagOf[perr.Field], partmap.ErrorMessage(err))
	}
	return err
}

// runOperation runs the subcommand name of operationCommands.
func runOperation(name string) func(ctx context.Context, e *env, args []string) error {
	c := operationCommands[name]
	return func(ctx context.Context, e *env, args []string) error {
		cf := newClientCommand(e, name, c.args)
		m := partmap.OperationJSON{Op: c.op}
		var dl deadlineFlags
		if takes, _ := c.op.Takes("time"); takes {
			dl.register(cf.fs)
		}
		setter := func(member string) func(string) error {
			return func(s string) error { return m.SetText(member, s) }
		}
		if c.condition != "" {
			cf.fs.Func("condition", c.condition, setter("condition"))
		}
		if takes, _ := c.op.Takes("persist"); takes {
			cf.fs.BoolFunc("persist", "remove the fields' deadlines", setter("persist"))
		}
		if takes, _ := c.op.Takes("keepTTL"); takes {
			cf.fs.BoolFunc("keep-ttl", "keep the deadlines the fields have (without it, writing a field drops its deadline)", setter("keepTTL"))
		}
		rest, cl, err := cf.parse(args, c.minArgs, c.maxArgs)
		if err != nil {
			return err
		}
		// Refused as the server would: an operation's members take an
		// empty email for a missing one.
		if _, err := partmap.CanonicalEmail(rest[0]); err != nil {
			return err
		}
		m.Email = rest[0]
		if err := dl.members(&m); err != nil {
			return err
		}
		if err := c.members(&m, rest[1:]); err != nil {
			return err
		}
		op, err := m.Operation()
		if err != nil {
			return flagError(err)
		}
		res, err := cl.Apply(ctx, op)
		if err != nil {
			return err
		}
		return c.print(e, op, res)
	}
}

// fieldArgs are the fields an operation acts on.
func fieldArgs(m *partmap.OperationJSON, args []string) error {
	if len(args) > 0 {
		m.Fields = &args
	}
	return nil
}

// setArgs are the fields to set: FIELD VALUE for setIfAbsent, FIELD=VALUE
// pairs for setFields.
func setArgs(m *partmap.OperationJSON, args []string) (err error) {
	set := partmap.Patch{}
	if m.Op == partmap.OpSetIfAbsent {
		set[args[0]] = &args[1]
	} else {
		for _, arg := range args {
			name, value, ok := strings.Cut(arg, "=")
			if !ok || name == "" {
				return usagef("%q is not FIELD=VALUE", arg)
			}
			set[name] = &value
		}
	}
	m.Set, err = set.MarshalJSON()
	return err
}

// printCodes prints one line per field (or one for the profile): the
// field, Redis's code, and what it means.
func printCodes(e *env, op partmap.Operation, res partmap.OperationResult) error {
	for i, code := range res.Codes {
		name := "(profile)"
		if len(op.Fields) > 0 {
			name = op.Fields[i]
		}
		fmt.Fprintf(e.stdout, "%s\t%d\t%s\n", name, code, expiryCode(op.Op, code))
	}
	return nil
}

// printSet prints 1 when setIfAbsent or setFields set their fields, and 0
// when not, saying why.
func printSet(e *env, op partmap.Operation, res partmap.OperationResult) error {
	fmt.Fprintln(e.stdout, boolInt(res.Set))
	switch {
	case res.Set:
	case op.Op == partmap.OpSetIfAbsent:
		fmt.Fprintf(e.stderr, "%s already has %s: left as it was\n", res.Email, op.Field)
	default:
		fmt.Fprintf(e.stderr, "condition %s not met: nothing set\n", op.FieldSet)
	}
	return nil
}

// printValues prints the fields read as one JSON object, in the order
// asked, null for a missing one, as get --fields does.
func printValues(e *env, op partmap.Operation, res partmap.OperationResult) error {
	return printJSON(e.stdout, partmap.Projection{Fields: op.Fields, Values: res.Values})
}

func runTTL(ctx context.Context, e *env, args []string) error {
	cf := newClientCommand(e, "ttl", "EMAIL [FIELD...]")
	ms := cf.fs.Bool("ms", false, "times to live in milliseconds (as PTTL), not seconds (as TTL)")
	rest, cl, err := cf.parse(args, 1, math.MaxInt)
	if err != nil {
		return err
	}
	ttls, err := cl.Deadlines(ctx, rest[0], rest[1:])
	if err != nil {
		return err
	}
	line := func(name string, deadline int64) {
		ttl := ttls.TTL(deadline)
		if ttl >= 0 && !*ms {
			ttl = (ttl + 500) / 1000 // rounded, as Redis's TTL rounds
		}
		at := expiryCode(partmap.OpKind(""), int(deadline))
		if deadline >= 0 {
			at = time.UnixMilli(deadline).UTC().Format("2006-01-02T15:04:05.000Z07:00") // to the millisecond always, as watch prints times
		}
		fmt.Fprintf(e.stdout, "%s\t%d\t%s\n", name, ttl, at)
	}
	line("(profile)", ttls.Profile)
	for i, f := range rest[1:] {
		line(f, ttls.Deadlines[i])
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
