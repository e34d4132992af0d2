package resp

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/partmap/partmap"
)

// FT.CREATE, FT.SEARCH, FT.INFO, FT._LIST and FT.DROPINDEX: the Redis Query
// Engine's commands on the directory's search indexes (issue 36), with
// the replies and error texts of Redis 8.0's, which the RediSearch module
// sends bare, without Redis's ERR prefix. The query's meaning is
// internal/search's; each command parses its arguments (a pure function),
// makes one call to the store, and writes its reply. An index holds every
// profile, as an index ON HASH of every key would: a key is a profile's
// email and a hash its fields but emailAddress (hashview.go).

// maxSearchOffset is Redis's default MAXSEARCHRESULTS, the largest LIMIT
// offset FT.SEARCH takes.
const maxSearchOffset = 1_000_000

// ftArgs reads arguments as RediSearch's ArgsCursor does: keywords in any
// case, counts as AC_GetUnsigned reads them.
type ftArgs struct {
	args [][]byte
	i    int
}

func (a *ftArgs) more() bool { return a.i < len(a.args) }

// next returns the next argument as it is, and moves past it.
func (a *ftArgs) next() string {
	s := string(a.args[a.i])
	a.i++
	return s
}

// match moves past the next argument if it is the keyword kw.
func (a *ftArgs) match(kw string) bool {
	if a.more() && strings.EqualFold(string(a.args[a.i]), kw) {
		a.i++
		return true
	}
	return false
}

// count reads a number that must be a whole number from 0 to hi, as
// AC_GetUnsigned does: an integer, or a decimal of a whole value.
func (a *ftArgs) count(hi int64) (int64, string) {
	if !a.more() {
		return 0, "Expected an argument, but none provided"
	}
	s := a.next()
	n, ok := partmap.ParseInteger(s)
	if !ok {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<62 {
			return 0, "Could not convert argument to expected type"
		}
		n = int64(f)
	}
	if n < 0 || n > hi {
		return 0, "Value is outside acceptable bounds"
	}
	return n, ""
}

// varArgs reads a count and that many arguments (AC_GetVarArgs), refused
// as RediSearch refuses the option name's.
func (a *ftArgs) varArgs(name string) ([]string, error) {
	n, bad := a.count(math.MaxUint32)
	if bad == "" && n > int64(len(a.args)-a.i) {
		bad = "Expected an argument, but none provided"
	}
	if bad != "" {
		return nil, refusal("Bad arguments for " + name + ": " + bad)
	}
	out := make([]string, n)
	for i := range out {
		out[i] = a.next()
	}
	return out, nil
}

// ftUnsupported refuses an argument Redis takes and partmap does not.
func ftUnsupported(arg, why string) error {
	return refusal(fmt.Sprintf("Unsupported argument `%s`: %s", clip([]byte(arg)), why))
}

// parseFTCreate reads FT.CREATE index [ON HASH] [PREFIX n ""...]
// [STOPWORDS n word...] SCHEMA field type [options] ..., in Redis's
// order: the index's options in any order, then SCHEMA and the fields.
//
// An index holds every profile, so the only prefix it takes is the empty
// one, which every key has (Redis's default). A field's type options come
// before SORTABLE, as Redis reads them.
func parseFTCreate(args [][]byte) (partmap.IndexDefinition, error) {
	def := partmap.IndexDefinition{Name: string(args[1])}
	a := &ftArgs{args: args, i: 2}
	const takes = "partmap's FT.CREATE takes ON HASH, PREFIX with the empty prefix alone, STOPWORDS and SCHEMA"
	for !a.match("SCHEMA") {
		if !a.more() {
			return def, refusal("No schema found")
		}
		switch opt := strings.ToUpper(a.next()); opt {
		case "ON":
			if !a.more() {
				return def, refusal("Bad arguments for ON: Expected an argument, but none provided")
			}
			switch t := a.next(); strings.ToUpper(t) {
			case "HASH":
			case "JSON":
				return def, ftUnsupported("JSON", "a profile is a hash; partmap indexes hashes only (ON HASH)")
			default:
				return def, refusal("Invalid rule type: " + clip([]byte(t)))
			}
		case "PREFIX":
			prefixes, err := a.varArgs("PREFIX")
			if err != nil {
				return def, err
			}
			for _, p := range prefixes {
				if p != "" {
					return def, ftUnsupported("PREFIX "+p, `an index holds every profile, so PREFIX takes only the empty prefix ("")`)
				}
			}
		case "STOPWORDS":
			words, err := a.varArgs("STOPWORDS")
			if err != nil {
				return def, err
			}
			def.Stopwords = words // STOPWORDS 0: none, not nil, which is Redis's list
		case "FILTER", "LANGUAGE", "LANGUAGE_FIELD", "SCORE", "SCORE_FIELD", "PAYLOAD_FIELD", "MAXTEXTFIELDS",
			"TEMPORARY", "NOOFFSETS", "NOHL", "NOFIELDS", "NOFREQS", "SKIPINITIALSCAN", "ASYNC", "NOSCOREIDX", "INDEXALL":
			return def, ftUnsupported(opt, takes)
		default:
			return def, refusal("Unknown argument `" + clip(args[a.i-1]) + "`")
		}
	}
	if !a.more() {
		return def, refusal("Fields arguments are missing")
	}
	for a.more() {
		f, err := parseFTField(a, def.Fields)
		if err != nil {
			return def, err
		}
		def.Fields = append(def.Fields, f)
	}
	return def, nil
}

// parseFTField reads one field of a SCHEMA.
func parseFTField(a *ftArgs, declared []partmap.IndexField) (partmap.IndexField, error) {
	f := partmap.IndexField{Name: a.next()}
	name := clip([]byte(f.Name))
	if a.match("AS") {
		return f, ftUnsupported("AS", "partmap indexes a field under its own name")
	}
	if slices.ContainsFunc(declared, func(d partmap.IndexField) bool { return d.Name == f.Name }) {
		return f, refusal("Duplicate field in schema - " + name)
	}
	if !a.more() {
		return f, refusal("Field `" + name + "` does not have a type")
	}
	typ := strings.ToUpper(a.next())
	refuse := func(opt string) error {
		return ftUnsupported(opt, fmt.Sprintf("partmap's %s fields take %s", typ, map[string]string{
			partmap.IndexText: "NOSTEM and SORTABLE", partmap.IndexTag: "SEPARATOR, CASESENSITIVE and SORTABLE",
			partmap.IndexNumeric: "SORTABLE"}[typ]))
	}
	switch typ {
	case partmap.IndexText, partmap.IndexTag, partmap.IndexNumeric:
		f.Type = typ
	case "GEO", "GEOSHAPE", "VECTOR":
		return f, ftUnsupported(typ, "partmap's fields are TEXT, TAG or NUMERIC")
	default:
		return f, refusal("Invalid field type for field `" + name + "`")
	}
	// The type's options, then SORTABLE; whatever follows names the next
	// field.
options:
	for ; a.more(); a.i++ {
		switch opt := strings.ToUpper(string(a.args[a.i])); {
		case typ == partmap.IndexText && opt == "NOSTEM":
			f.NoStem = true
		case typ == partmap.IndexTag && opt == "CASESENSITIVE":
			f.CaseSensitive = true
		case typ == partmap.IndexTag && opt == "SEPARATOR":
			a.i++
			if !a.more() {
				return f, refusal("SEPARATOR requires an argument")
			}
			if f.Separator = string(a.args[a.i]); len(f.Separator) != 1 {
				return f, refusal("Tag separator must be a single character. Got `" + clip(a.args[a.i]) + "`")
			}
		case slices.Contains([]string{"WEIGHT", "PHONETIC", "WITHSUFFIXTRIE", "INDEXEMPTY", "INDEXMISSING"}, opt):
			return f, refuse(opt)
		default:
			break options
		}
	}
	for a.match("SORTABLE") {
		f.Sortable = true
		if a.match("UNF") {
			return f, refuse("UNF")
		}
	}
	if a.match("NOINDEX") {
		return f, refuse("NOINDEX")
	}
	return f, nil
}

// parseFTSearch reads FT.SEARCH index query [NOCONTENT] [RETURN n field...]
// [SORTBY field [ASC|DESC]] [LIMIT offset num] [DIALECT 2], the options in
// any order. RETURN 0 is NOCONTENT, as in Redis, and LIMIT 0 0 asks for the
// count alone.
func parseFTSearch(args [][]byte) (partmap.SearchOptions, error) {
	opts := partmap.SearchOptions{Query: string(args[2])}
	a := &ftArgs{args: args, i: 3}
	const takes = "partmap's FT.SEARCH takes NOCONTENT, RETURN, SORTBY, LIMIT and DIALECT 2"
	sorted := false
	for a.more() {
		switch opt := strings.ToUpper(a.next()); opt {
		case "NOCONTENT":
			opts.NoContent = true
		case "RETURN":
			fields, err := a.varArgs("RETURN")
			if err != nil {
				return opts, err
			}
			if len(fields) == 0 {
				opts.NoContent = true
			}
			opts.Return = []string{}
			for i, f := range fields {
				if strings.EqualFold(f, "AS") && i > 0 {
					return opts, ftUnsupported("AS", "RETURN names fields by their own names")
				}
				// The key is not a field, nor is "", and Redis returns a
				// field named twice once.
				if f != partmap.FieldEmail && f != "" && !slices.Contains(opts.Return, f) {
					opts.Return = append(opts.Return, f)
				}
			}
		case "LIMIT":
			if len(args)-a.i < 2 {
				return opts, refusal("LIMIT requires two arguments")
			}
			offset, bad := a.count(math.MaxInt64)
			num, bad2 := a.count(math.MaxInt64)
			switch {
			case bad != "" || bad2 != "":
				return opts, refusal("LIMIT needs two numeric arguments")
			case num == 0 && offset != 0:
				return opts, refusal("The `offset` of the LIMIT must be 0 when `num` is 0")
			case num > partmap.MaxSearchLimit:
				return opts, refusal(fmt.Sprintf("LIMIT exceeds maximum of %d", partmap.MaxSearchLimit))
			case offset > maxSearchOffset:
				return opts, refusal(fmt.Sprintf("OFFSET exceeds maximum of %d", maxSearchOffset))
			case num == 0:
				opts.Offset, opts.Limit = 0, -1 // the count alone
			default:
				opts.Offset, opts.Limit = int(offset), int(num)
			}
		case "SORTBY":
			if sorted {
				return opts, refusal("Multiple SORTBY steps are not allowed")
			}
			if !a.more() {
				return opts, refusal("Bad SORTBY arguments")
			}
			sorted, opts.SortBy = true, a.next()
			if a.match("DESC") {
				opts.Descending = true
			} else {
				a.match("ASC")
			}
			if a.match("MAX") {
				return opts, refusal("SORTBY MAX is not supported by FT.SEARCH")
			}
		case "DIALECT":
			if !a.more() {
				return opts, refusal("Need an argument for DIALECT")
			}
			if d := a.next(); d != "2" {
				return opts, ftUnsupported("DIALECT "+d, "partmap reads queries as DIALECT 2 does")
			}
		case "VERBATIM", "NOSTOPWORDS", "WITHSCORES", "WITHPAYLOADS", "WITHSORTKEYS", "FILTER", "GEOFILTER", "INKEYS",
			"INFIELDS", "SUMMARIZE", "HIGHLIGHT", "SLOP", "TIMEOUT", "INORDER", "LANGUAGE", "EXPANDER", "SCORER",
			"EXPLAINSCORE", "PAYLOAD", "PARAMS", "FORMAT", "WITHCOUNT", "WITHOUTCOUNT", "ADDSCORES":
			return opts, ftUnsupported(opt, takes)
		default:
			// The position is counted from the query, as RediSearch counts.
			return opts, refusal(fmt.Sprintf("Unknown argument `%s` at position %d for <main>", clip(args[a.i-1]), a.i-3))
		}
	}
	if opts.NoContent {
		opts.Return = nil
	}
	return opts, nil
}

// ftError is the reply to a store's error of an FT command: notFound,
// when given, for an unknown index (each command has its own text in
// Redis 8.0), Redis's words for an index that exists, a refusal's message
// as it is (the query's errors are in Redis's words), and the store's
// other failures as every command answers them (storeError: TRYAGAIN,
// LOADING for an index still being built, not started).
func ftError(err error, notFound string) string {
	switch partmap.ErrorCode(err) {
	case partmap.ENOTFOUND:
		if notFound != "" {
			return notFound
		}
	case partmap.EEXISTS:
		return "Index already exists"
	case partmap.EINVALID:
		return oneLine(partmap.ErrorMessage(err))
	}
	return storeError(err)
}

func cmdFTCreate(k *call) {
	def, err := parseFTCreate(k.args)
	if err != nil {
		k.w.fail(err)
		return
	}
	if err := k.store.CreateIndex(k.ctx, def); err != nil {
		k.w.WriteError(ftError(err, ""))
		return
	}
	k.w.ok()
}

// cmdFTDropIndex drops an index; its profiles stay. DD, which in Redis
// also deletes the hashes the index holds, is refused: a partmap index
// holds every profile, and DD would delete the whole directory.
func cmdFTDropIndex(k *call) {
	name := k.arg(1)
	switch {
	case len(k.args) > 3:
		k.w.WriteError("ERR wrong number of arguments for 'FT.DROPINDEX' command")
		return
	case len(k.args) == 3 && strings.EqualFold(k.arg(2), "DD"):
		k.w.fail(ftUnsupported("DD", "an index holds every profile, so DD would delete the whole directory; "+
			"drop the index alone, and delete profiles with DEL, or all of them with FLUSHALL"))
		return
	case len(k.args) == 3:
		k.w.WriteError("Unknown argument")
		return
	}
	if err := k.store.DropIndex(k.ctx, name); err != nil {
		k.w.WriteError(ftError(err, clip(k.args[1])+": no such index"))
		return
	}
	k.w.ok()
}

func cmdFTList(k *call) {
	if len(k.args) > 2 {
		k.w.WriteError("ERR wrong number of arguments for 'FT._LIST' command")
		return
	}
	infos, err := k.store.ListIndexes(k.ctx)
	if err != nil {
		k.w.WriteError(ftError(err, ""))
		return
	}
	k.w.setLen(len(infos))
	for _, info := range infos {
		k.w.WriteString(info.Name) // an index name holds no white space
	}
}

// cmdFTSearch answers, in RESP2, the total and then each hit's key and,
// but with NOCONTENT, its fields as a flat array of names and values;
// in RESP3, Redis 8's map of attributes, format, results (each a map of
// id, extra_attributes and values), total_results and warning. Hits come
// in SORTBY order, or without it in enumeration order: by partition, then
// by email (partmap computes no relevance score).
func cmdFTSearch(k *call) {
	opts, err := parseFTSearch(k.args)
	if err != nil {
		k.w.fail(err)
		return
	}
	res, err := k.store.Search(k.ctx, k.arg(1), opts)
	if err != nil {
		k.w.WriteError(ftError(err, "No such index "+clip(k.args[1])))
		return
	}
	fields := func(h partmap.SearchHit) []partmap.FieldValue {
		return slices.DeleteFunc(h.Fields, func(f partmap.FieldValue) bool { return f.Name == partmap.FieldEmail })
	}
	w := k.w
	if w.proto == 3 {
		w.mapLen(5)
		w.WriteString("attributes")
		w.WriteArray(0)
		w.WriteString("format")
		w.WriteString("STRING")
		w.WriteString("results")
		w.WriteArray(len(res.Hits))
		for _, h := range res.Hits {
			w.mapLen(map[bool]int{true: 2, false: 3}[opts.NoContent])
			w.WriteString("id")
			w.WriteBulkString(h.Email)
			if !opts.NoContent {
				fv := fields(h)
				w.WriteString("extra_attributes")
				w.mapLen(len(fv))
				for _, f := range fv {
					w.WriteBulkString(f.Name)
					w.WriteBulkString(f.Value)
				}
			}
			w.WriteString("values")
			w.WriteArray(0)
		}
		w.WriteString("total_results")
		w.WriteInt64(res.Total)
		w.WriteString("warning")
		w.WriteArray(0)
		return
	}
	per := 2
	if opts.NoContent {
		per = 1
	}
	w.WriteArray(1 + per*len(res.Hits))
	w.WriteInt64(res.Total)
	for _, h := range res.Hits {
		w.WriteBulkString(h.Email)
		if !opts.NoContent {
			fv := fields(h)
			w.WriteArray(2 * len(fv))
			for _, f := range fv {
				w.WriteBulkString(f.Name)
				w.WriteBulkString(f.Value)
			}
		}
	}
}

// cmdFTInfo answers the fields of Redis 8's FT.INFO that hold for a
// partmap index, in its shape (a map in RESP3, a flat array of names and
// values in RESP2): index_name, index_options (none), index_definition
// (HASH, the empty prefix: every profile), attributes, num_docs, indexing
// and percent_indexed (the share of partitions built, 0 to 1), and
// stopwords_list when the index has its own. The legacy index's TAG fields
// hold whole values, unsplit: they have no SEPARATOR.
func cmdFTInfo(k *call) {
	infos, err := k.store.ListIndexes(k.ctx)
	if err != nil {
		k.w.WriteError(ftError(err, ""))
		return
	}
	i := slices.IndexFunc(infos, func(info partmap.IndexInfo) bool { return info.Name == k.arg(1) })
	if i < 0 {
		k.w.WriteError(clip(k.args[1]) + ": no such index")
		return
	}
	info := infos[i]
	w := k.w
	pairs := 7
	if info.Stopwords != nil {
		pairs++
	}
	w.mapLen(pairs)
	w.WriteString("index_name")
	w.WriteString(info.Name)
	w.WriteString("index_options")
	w.WriteArray(0)
	w.WriteString("index_definition")
	w.mapLen(4)
	w.WriteString("key_type")
	w.WriteString("HASH")
	w.WriteString("prefixes")
	w.WriteArray(1)
	w.WriteString("")
	w.WriteString("default_score")
	w.double(1)
	w.WriteString("indexes_all")
	w.WriteString("false")
	w.WriteString("attributes")
	w.WriteArray(len(info.Fields))
	for _, f := range info.Fields {
		w.writeAttribute(f)
	}
	w.WriteString("num_docs")
	w.WriteInt64(info.Docs)
	w.WriteString("indexing")
	w.WriteInt(map[bool]int{true: 1, false: 0}[info.Building])
	w.WriteString("percent_indexed")
	w.double(info.Progress)
	if info.Stopwords != nil {
		w.WriteString("stopwords_list")
		w.strings(info.Stopwords)
	}
}

// writeAttribute writes one field of FT.INFO's attributes: its name and
// type, a TEXT field's WEIGHT (always 1), a TAG field's SEPARATOR, and
// its flags, which RESP3 lists under "flags" and RESP2 after the pairs.
func (w *writer) writeAttribute(f partmap.IndexField) {
	var flags []string
	if f.CaseSensitive {
		flags = append(flags, "CASESENSITIVE")
	}
	if f.Sortable {
		flags = append(flags, "SORTABLE")
		if f.Type == partmap.IndexNumeric {
			flags = append(flags, "UNF") // numbers are sorted as they are
		}
	}
	if f.NoStem {
		flags = append(flags, "NOSTEM")
	}
	pairs := 3
	switch {
	case f.Type == partmap.IndexText, f.Type == partmap.IndexTag && !f.Whole:
		pairs++
	}
	if w.proto == 3 {
		w.mapLen(pairs + 1)
	} else {
		w.WriteArray(2*pairs + len(flags))
	}
	w.WriteString("identifier")
	w.WriteBulkString(f.Name)
	w.WriteString("attribute")
	w.WriteBulkString(f.Name)
	w.WriteString("type")
	w.WriteString(f.Type)
	switch {
	case f.Type == partmap.IndexText:
		w.WriteString("WEIGHT")
		w.double(1)
	case f.Type == partmap.IndexTag && !f.Whole:
		w.WriteString("SEPARATOR")
		w.WriteBulkString(cmp.Or(f.Separator, ","))
	}
	if w.proto == 3 {
		w.WriteString("flags")
		w.WriteArray(len(flags))
	}
	for _, flag := range flags {
		w.WriteString(flag)
	}
}
