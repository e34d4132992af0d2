package resp

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// doc is what COMMAND DOCS tells of a command. redis-cli draws its hints
// (the arguments still to type, in grey) from the arguments, so an empty
// answer would leave it without any.
type doc struct {
	summary, since, group string
	args                  []argDoc
	subcommands           map[string]doc // "client|setname" and so on
}

// argDoc is one argument as COMMAND DOCS describes it.
type argDoc struct {
	name, typ, token string
	flags            []string // optional, multiple
	args             []argDoc // of a block or a oneof
}

// parseDoc reads a command's doc as the table writes it: "GROUP SINCE;
// ARGUMENTS; SUMMARY".
func parseDoc(s string) doc {
	head, rest, _ := strings.Cut(s, "; ")
	args, summary, _ := strings.Cut(rest, "; ")
	group, since, _ := strings.Cut(head, " ")
	return doc{summary: summary, since: since, group: group, args: parseArgDocs(args)}
}

// parseArgDocs reads the compact form of the table's arguments: each is
// name:type, then /tok=TOKEN and /flag,flag where they apply, then
// {children} for a block or a oneof. It panics on a malformed one: the
// table is the program's own.
func parseArgDocs(s string) []argDoc {
	var out []argDoc
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		end := strings.IndexAny(s, " {")
		if end < 0 {
			end = len(s)
		}
		head := s[:end]
		s = s[end:]
		name, rest, ok := strings.Cut(head, ":")
		if !ok {
			panic(fmt.Sprintf("resp: argument %q has no type", head))
		}
		parts := strings.Split(rest, "/")
		a := argDoc{name: name, typ: parts[0]}
		for _, p := range parts[1:] {
			if tok, ok := strings.CutPrefix(p, "tok="); ok {
				a.token = tok
			} else {
				a.flags = strings.Split(p, ",")
			}
		}
		if strings.HasPrefix(s, "{") {
			depth, i := 0, 0
			for ; i < len(s); i++ {
				switch s[i] {
				case '{':
					depth++
				case '}':
					depth--
				}
				if depth == 0 {
					break
				}
			}
			if depth != 0 {
				panic(fmt.Sprintf("resp: unbalanced arguments of %q", name))
			}
			a.args = parseArgDocs(s[1:i])
			s = s[i+1:]
		}
		out = append(out, a)
	}
	return out
}

// writeDoc writes d as COMMAND DOCS does: a map of its properties.
func (w *writer) writeDoc(d doc) {
	n := 3
	if len(d.args) > 0 {
		n++
	}
	if len(d.subcommands) > 0 {
		n++
	}
	w.mapLen(n)
	w.pairs("summary", d.summary, "since", d.since, "group", d.group)
	if len(d.args) > 0 {
		w.WriteBulkString("arguments")
		w.writeArgDocs(d.args)
	}
	if len(d.subcommands) > 0 {
		w.WriteBulkString("subcommands")
		w.mapLen(len(d.subcommands))
		for _, name := range slices.Sorted(maps.Keys(d.subcommands)) {
			w.WriteBulkString(name)
			w.writeDoc(d.subcommands[name])
		}
	}
}

// pairs writes keys and their values, alternating, of a map.
func (w *writer) pairs(kvs ...string) {
	for _, s := range kvs {
		w.WriteBulkString(s)
	}
}

func (w *writer) writeArgDocs(args []argDoc) {
	w.WriteArray(len(args))
	for _, a := range args {
		n := 2
		for _, has := range []bool{a.token != "", len(a.flags) > 0, len(a.args) > 0} {
			if has {
				n++
			}
		}
		w.mapLen(n)
		w.pairs("name", a.name, "type", a.typ)
		if a.token != "" {
			w.pairs("token", a.token)
		}
		if len(a.flags) > 0 {
			w.WriteBulkString("flags")
			w.WriteArray(len(a.flags))
			for _, f := range a.flags {
				w.WriteString(f)
			}
		}
		if len(a.args) > 0 {
			w.WriteBulkString("arguments")
			w.writeArgDocs(a.args)
		}
	}
}

// docOf returns the docs of a command, or of a subcommand named as Redis
// names it ("client|setname"), nil for one partmap does not have.
func docOf(name string) *doc {
	parent, _, isSub := strings.Cut(name, "|")
	cmd, ok := commands[parent]
	if !ok {
		return nil
	}
	d := cmd.about
	if isSub {
		if d, ok = cmd.about.subcommands[name]; !ok {
			return nil
		}
	}
	return &d
}
