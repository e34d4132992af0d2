package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
)

// runIndex creates, lists and drops search indexes: FT.CREATE, FT._LIST
// with FT.INFO, and FT.DROPINDEX over HTTP.
func runIndex(ctx context.Context, e *env, args []string) error {
	verbs := map[string]func(context.Context, *env, []string) error{
		"create": runIndexCreate,
		"list":   runIndexList,
		"drop":   runIndexDrop,
	}
	if len(args) > 0 {
		if run, ok := verbs[args[0]]; ok {
			return run(ctx, e, args[1:])
		}
	}
	w := e.stderr
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		w = e.stdout
	}
	fmt.Fprint(w, `usage:
  partmap index create [flags] NAME FIELD:TYPE[:OPTION]...   declare an index; existing profiles are indexed in the background
  partmap index list [flags]                                 every index, its fields and whether it is built
  partmap index drop [flags] NAME                            drop an index (its profiles stay)

Run `+"`partmap index VERB --help`"+` for a verb's flags.
`)
	if w == e.stdout {
		return nil
	}
	return errUsageReported
}

// listFlag is a comma-separated list whose absence is not an empty list:
// --stopwords ” is STOPWORDS 0, where no --stopwords is Redis's default
// list; --return ” is RETURN 0.
type listFlag struct {
	set   bool
	words []string
}

func (f *listFlag) String() string { return strings.Join(f.words, ",") }

func (f *listFlag) Set(v string) error {
	f.set, f.words = true, []string{}
	if v != "" {
		f.words = strings.Split(v, ",")
	}
	return nil
}

const fieldSpecHelp = `FIELD:TYPE[:OPTION]... declares a field: TYPE is TEXT, TAG or NUMERIC, and
the OPTIONs are sortable; nostem (TEXT); casesensitive, whole and separator=C
(TAG, C one character other than a colon). Everything before the type is the
field's name, colons included.`

func runIndexCreate(ctx context.Context, e *env, args []string) error {
	cf := newClientCommand(e, "index create", "NAME FIELD:TYPE[:OPTION]...")
	var stop listFlag
	cf.fs.Var(&stop, "stopwords", "comma-separated `words` TEXT fields leave out (STOPWORDS); '' for none; without it, Redis's default English list")
	detach := cf.fs.Bool("detach", false, "return once the index is declared; the build goes on in the server")
	usage := cf.fs.Usage
	cf.fs.Usage = func() { usage(); fmt.Fprintf(e.stderr, "\n%s\n", fieldSpecHelp) }
	rest, cl, err := cf.parse(args, 2, math.MaxInt) // the server bounds the fields
	if err != nil {
		return err
	}
	def := partmap.IndexDefinition{Name: rest[0]}
	for _, spec := range rest[1:] {
		f, err := parseFieldSpec(spec)
		if err != nil {
			return err
		}
		def.Fields = append(def.Fields, f)
	}
	if stop.set {
		def.Stopwords = stop.words
	}
	if err := cl.CreateIndex(ctx, def); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "created index %s; the profiles that exist are indexed in the background, while reads and writes go on\n", def.Name)
	if *detach {
		return nil
	}
	info, err := waitBuilt(ctx, e, cl, def.Name)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "index %s is built: %s\n", info.Name, count(info.Docs, "profile"))
	return nil
}

// waitBuilt follows an index's build, with a progress bar on a terminal,
// until searches of it are answered.
func waitBuilt(ctx context.Context, e *env, cl *pmhttp.Client, name string) (partmap.IndexInfo, error) {
	bar := progressbar.NewOptions(1000, progressbar.OptionSetWriter(e.stderr), progressbar.OptionSetVisibility(isTerminal(e.stderr)),
		progressbar.OptionSetDescription("indexing"), progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
	for {
		infos, err := cl.ListIndexes(ctx)
		if err != nil {
			return partmap.IndexInfo{}, err
		}
		i := slices.IndexFunc(infos, func(x partmap.IndexInfo) bool { return x.Name == name })
		if i < 0 {
			return partmap.IndexInfo{}, fmt.Errorf("index %s is gone: it was dropped while it was being built", name)
		}
		if !infos[i].Building {
			bar.Finish()
			return infos[i], nil
		}
		bar.Set(int(infos[i].Progress * 1000))
		select {
		case <-ctx.Done():
			fmt.Fprintln(e.stderr, "\nstopped watching; the build goes on in the server (`partmap index list` shows it)")
			return partmap.IndexInfo{}, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// parseFieldSpec reads FIELD:TYPE[:OPTION]...: the type is the last
// element that names one, before options only, so that a field's name
// may hold colons.
func parseFieldSpec(spec string) (partmap.IndexField, error) {
	parts := strings.Split(spec, ":")
	at := -1
	for i := len(parts) - 1; i > 0; i-- {
		switch strings.ToUpper(parts[i]) {
		case partmap.IndexText, partmap.IndexTag, partmap.IndexNumeric:
			at = i
		}
		if at >= 0 {
			break
		}
	}
	if at < 0 {
		return partmap.IndexField{}, usagef("field %q: want FIELD:TYPE[:OPTION]..., TYPE being TEXT, TAG or NUMERIC", spec)
	}
	f := partmap.IndexField{Name: strings.Join(parts[:at], ":"), Type: strings.ToUpper(parts[at])}
	if f.Name == "" {
		return partmap.IndexField{}, usagef("field %q has no name before its type", spec)
	}
	for _, opt := range parts[at+1:] {
		key, value, hasValue := strings.Cut(opt, "=")
		switch key = strings.ToLower(key); {
		case key == "sortable" && !hasValue:
			f.Sortable = true
		case key == "nostem" && !hasValue:
			f.NoStem = true
		case key == "casesensitive" && !hasValue:
			f.CaseSensitive = true
		case key == "whole" && !hasValue:
			f.Whole = true
		case key == "separator" && hasValue:
			if value == "" {
				return partmap.IndexField{}, usagef("field %q: separator= needs its character; without the option it is ,", spec)
			}
			f.Separator = value
		default:
			return partmap.IndexField{}, usagef("field %q: unknown option %q; the options are sortable, nostem, casesensitive, whole and separator=C", spec, opt)
		}
	}
	// The server judges which options go with which type, and says so.
	return f, nil
}

// fieldSpec writes a field as parseFieldSpec reads it.
func fieldSpec(f partmap.IndexField) string {
	s := f.Name + ":" + f.Type
	for _, opt := range []struct {
		on   bool
		name string
	}{{f.Sortable, "sortable"}, {f.NoStem, "nostem"}, {f.CaseSensitive, "casesensitive"}, {f.Whole, "whole"}, {f.Separator != "", "separator=" + f.Separator}} {
		if opt.on {
			s += ":" + opt.name
		}
	}
	return s
}

func runIndexList(ctx context.Context, e *env, args []string) error {
	cf := newClientCommand(e, "index list", "")
	asJSON := cf.fs.Bool("json", false, "print each index as a JSON line (as GET /indexes has it) instead of a table")
	_, cl, err := cf.parse(args, 0, 0)
	if err != nil {
		return err
	}
	infos, err := cl.ListIndexes(ctx)
	if err != nil {
		return err
	}
	if !*asJSON {
		fmt.Fprintln(e.stdout, "NAME\tPROFILES\tSTATE\tSTOPWORDS\tFIELDS")
	}
	for _, x := range infos {
		if *asJSON {
			b, err := json.Marshal(x)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "%s\n", b)
			continue
		}
		state := "ready"
		if x.Building {
			state = fmt.Sprintf("building %d%%", int(x.Progress*100))
		}
		stop := "default"
		if x.Stopwords != nil {
			stop = cmp.Or(strings.Join(x.Stopwords, ","), "none")
		}
		specs := make([]string, len(x.Fields))
		for i, f := range x.Fields {
			specs[i] = fieldSpec(f)
		}
		fmt.Fprintf(e.stdout, "%s\t%d\t%s\t%s\t%s\n", x.Name, x.Docs, state, cell(stop), cell(strings.Join(specs, " ")))
	}
	if len(infos) == 1 {
		fmt.Fprintln(e.stderr, "1 index")
	} else {
		fmt.Fprintf(e.stderr, "%s\n", count(len(infos), "index"))
	}
	return nil
}

func runIndexDrop(ctx context.Context, e *env, args []string) error {
	rest, cl, err := newClientCommand(e, "index drop", "NAME").parse(args, 1, 1)
	if err != nil {
		return err
	}
	if err := cl.DropIndex(ctx, rest[0]); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "dropped index %s; its entries are removed in the background, and no profile is touched\n", rest[0])
	return nil
}
