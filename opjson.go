package partmap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// OperationJSON is an Operation as JSON spells it: an operation of the HTTP
// route POST /transactions, and a line of `partmap tx`. The routes of single
// operations take the same members as query parameters and body, and the
// CLI as arguments and flags; both set them with SetText. Operation reads
// the members of every door into an Operation, so that each kind is parsed
// once. ifMatch and ifNoneMatch are the values of the HTTP headers of those
// names.
type OperationJSON struct {
	Op        OpKind          `json:"op"`
	Email     string          `json:"emailAddress,omitempty"`
	Profile   json.RawMessage `json:"profile,omitempty"`
	Patch     json.RawMessage `json:"patch,omitempty"`
	Field     string          `json:"field,omitempty"`
	By        json.RawMessage `json:"by,omitempty"` // a JSON integer, or a decimal string past 2^53; incrementFloat: a number or a string
	To        string          `json:"to,omitempty"`
	Fields    *[]string       `json:"fields,omitempty"`
	Set       json.RawMessage `json:"set,omitempty"` // a JSON object of strings
	Condition string          `json:"condition,omitempty"`
	Create    *bool           `json:"create,omitempty"`       // increment, incrementFloat: create a missing profile
	Missing   *bool           `json:"allowMissing,omitempty"` // delete: a missing profile is no error
	Replace   *bool           `json:"replace,omitempty"`      // rename, copy: replace the profile of to
	Persist   *bool           `json:"persist,omitempty"`
	KeepTTL   *bool           `json:"keepTTL,omitempty"`
	// The time, in one of the four ways of timeMembers: an integer.
	Seconds        json.RawMessage `json:"seconds,omitempty"`
	Milliseconds   json.RawMessage `json:"milliseconds,omitempty"`
	At             json.RawMessage `json:"at,omitempty"`
	AtMilliseconds json.RawMessage `json:"atMilliseconds,omitempty"`
	IfMatch        *string         `json:"ifMatch,omitempty"`
	IfNoneMatch    *string         `json:"ifNoneMatch,omitempty"`
}

// jsonMembers says which members each kind takes; a ? marks one it may go
// without. time stands for one of timeMembers.
var jsonMembers = map[OpKind]string{
	OpPut:            "profile",
	OpPatch:          "emailAddress patch",
	OpIncrement:      "emailAddress field by create?",
	OpDelete:         "emailAddress allowMissing?",
	OpRename:         "emailAddress to replace?",
	OpCopy:           "emailAddress to replace?",
	OpGet:            "emailAddress fields?",
	OpExpire:         "emailAddress fields? time condition?",
	OpPersist:        "emailAddress fields?",
	OpIncrementFloat: "emailAddress field by create?",
	OpSetIfAbsent:    "emailAddress set",
	OpGetDelete:      "emailAddress fields",
	OpGetExpire:      "emailAddress fields time? persist?",
	OpSetFields:      "emailAddress set condition? time? keepTTL?",
}

// Takes reports whether an operation of kind k takes the member of
// OperationJSON named member ("time" for any of the four times), and
// whether it needs it.
func (k OpKind) Takes(member string) (takes, required bool) {
	want := " " + jsonMembers[k] + " "
	required = strings.Contains(want, " "+member+" ")
	return required || strings.Contains(want, " "+member+"? "), required
}

// timeMembers are the four ways to give a time, as HEXPIRE, HPEXPIRE,
// HEXPIREAT and HPEXPIREAT take it.
var timeMembers = [...]struct {
	name              string
	seconds, relative bool
}{
	{"seconds", true, true},
	{"milliseconds", false, true},
	{"at", true, false},
	{"atMilliseconds", false, false},
}

// timeNames lists timeMembers' names for messages.
const timeNames = "seconds, milliseconds, at or atMilliseconds"

func (w *OperationJSON) times() [len(timeMembers)]*json.RawMessage {
	return [...]*json.RawMessage{&w.Seconds, &w.Milliseconds, &w.At, &w.AtMilliseconds}
}

// SetText sets the member named member from text, as a query parameter or
// a command-line flag gives it: a time as its integer, a boolean as true
// or false, and the others as they are.
func (w *OperationJSON) SetText(member, text string) error {
	for i, t := range timeMembers {
		if t.name == member {
			*w.times()[i] = append(json.RawMessage{}, text...) // never nil: "" is given
			return nil
		}
	}
	flags := map[string]**bool{"persist": &w.Persist, "keepTTL": &w.KeepTTL, "create": &w.Create, "allowMissing": &w.Missing, "replace": &w.Replace}
	texts := map[string]*string{"emailAddress": &w.Email, "field": &w.Field, "to": &w.To, "condition": &w.Condition}
	switch {
	case flags[member] != nil && text == "": // as if not given
	case flags[member] != nil:
		b, err := strconv.ParseBool(text)
		if err != nil || (text != "true" && text != "false") {
			return &Error{Code: EINVALID, Field: member, Message: fmt.Sprintf("%s is true or false, not %q", member, text)}
		}
		*flags[member] = &b
	case texts[member] != nil:
		*texts[member] = text
	case member == "by":
		w.By = json.RawMessage(strconv.Quote(text))
	default:
		return fmt.Errorf("partmap: no member %q takes text", member)
	}
	return nil
}

// ParseOperationJSON reads one operation in its JSON form, strictly: an
// unknown member is EMALFORMEDJSON, and one its kind does not take
// EINVALID.
func ParseOperationJSON(data []byte) (Operation, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var w OperationJSON
	if err := dec.Decode(&w); err != nil {
		return Operation{}, Errorf(EMALFORMEDJSON, "not an operation: %v", err)
	}
	return w.Operation()
}

// Operation reads w's members into an Operation. An unknown kind, a member
// the kind does not take or needs and lacks, and a bad value are
// EINVALID, naming the member.
func (w OperationJSON) Operation() (Operation, error) {
	if _, known := jsonMembers[w.Op]; !known {
		return Operation{}, Errorf(EINVALID,
			"unknown op %q: it is put, patch, increment, delete, rename, copy, get, expire, persist, incrementFloat, setIfAbsent, getDelete, getExpire or setFields", w.Op)
	}
	if err := w.checkPresent(); err != nil {
		return Operation{}, err
	}
	op := Operation{Op: w.Op, Email: w.Email, Field: w.Field, To: w.To,
		Create: w.Create != nil && *w.Create, AllowMissing: w.Missing != nil && *w.Missing, Replace: w.Replace != nil && *w.Replace}
	if w.Fields != nil {
		op.Fields = *w.Fields
	}
	if op.Op != OpGet {
		if err := FieldsOnce(op.Fields); err != nil {
			return op, err
		}
	}
	when, err := w.when(op.LatestDeadline())
	if err != nil {
		return op, err
	}
	switch w.Op {
	case OpPut:
		op.Profile, err = ParseProfileJSON(w.Profile)
	case OpPatch:
		op.Patch, err = ParsePatchJSON(w.Patch)
	case OpIncrement:
		if op.By, err = strconv.ParseInt(unquote(w.By), 10, 64); err != nil {
			err = &Error{Code: EINVALID, Field: "by", Message: fmt.Sprintf("by must be an integer within int64, not %s", w.By)}
		}
	case OpIncrementFloat:
		op.ByFloat = unquote(w.By)
		if err = ParseFloatIncrement(op.ByFloat); err != nil {
			err = &Error{Code: ErrorCode(err), Field: "by", Message: "by: " + ErrorMessage(err)}
		}
	case OpExpire:
		op.When = *when
		op.ExpireCond, err = ParseExpireCondition(w.Condition)
	case OpSetIfAbsent:
		var set Patch
		set, err = parseSet(w.Set, true)
		for op.Field = range set {
			op.Value = *set[op.Field]
		}
	case OpGetExpire:
		op.Expiry = FieldExpiry{When: when, Persist: w.Persist != nil && *w.Persist}
		err = timeOr(op.Expiry.Persist && when != nil, "persist")
	case OpSetFields:
		op.Expiry = FieldExpiry{When: when, KeepTTL: w.KeepTTL != nil && *w.KeepTTL}
		if err = timeOr(op.Expiry.KeepTTL && when != nil, "keepTTL"); err == nil {
			op.FieldSet, err = ParseFieldSetCondition(w.Condition)
		}
		if err == nil {
			op.Set, err = parseSet(w.Set, false)
		}
	}
	if err != nil {
		return op, err
	}
	var ifMatch, ifNoneMatch []string
	if w.IfMatch != nil {
		ifMatch = []string{*w.IfMatch}
	}
	if w.IfNoneMatch != nil {
		ifNoneMatch = []string{*w.IfNoneMatch}
	}
	op.Cond, err = ParseCondition(ifMatch, ifNoneMatch)
	return op, err
}

// FieldsOnce refuses fields that name a field twice (EINVALID, naming
// it). A store takes a field named twice in turn, as Redis
// does, but the HTTP API names each field of an expiry operation and of a
// ttl read once: a getDelete's and a getExpire's values are an object
// keyed by field name.
func FieldsOnce(fields []string) error {
	seen := make(map[string]bool, len(fields))
	for _, f := range fields {
		if seen[f] {
			return &Error{Code: EINVALID, Field: f, Message: fmt.Sprintf("field %q is named twice; over HTTP, name each field once", f)}
		}
		seen[f] = true
	}
	return nil
}

// checkPresent refuses a member w's kind does not take, and a missing one
// it needs.
func (w *OperationJSON) checkPresent() error {
	present := []struct {
		name string
		has  bool
	}{{"emailAddress", w.Email != ""}, {"profile", w.Profile != nil}, {"patch", w.Patch != nil},
		{"field", w.Field != ""}, {"by", w.By != nil}, {"to", w.To != ""}, {"fields", w.Fields != nil}, {"set", w.Set != nil},
		{"condition", w.Condition != ""}, {"persist", w.Persist != nil}, {"keepTTL", w.KeepTTL != nil},
		{"create", w.Create != nil}, {"allowMissing", w.Missing != nil}, {"replace", w.Replace != nil}}
	for _, p := range present {
		takes, required := w.Op.Takes(p.name)
		switch {
		case p.has && !takes && !(w.Op == OpPut && p.name == "emailAddress"):
			return &Error{Code: EINVALID, Field: p.name, Message: fmt.Sprintf("a %s takes no %q", w.Op, p.name)}
		case !p.has && required:
			return &Error{Code: EINVALID, Field: p.name, Message: fmt.Sprintf("a %s needs %q", w.Op, p.name)}
		}
	}
	timed := false
	takes, required := w.Op.Takes("time")
	for i, raw := range w.times() {
		if *raw != nil && !takes {
			return &Error{Code: EINVALID, Field: timeMembers[i].name, Message: fmt.Sprintf("a %s takes no %q", w.Op, timeMembers[i].name)}
		}
		timed = timed || *raw != nil
	}
	if required && !timed {
		return &Error{Code: EINVALID, Field: timeMembers[0].name, Message: "give the deadline: one of " + timeNames}
	}
	return nil
}

// when reads the one time w gives: nil when it gives none, and an error
// naming the second when it gives two. A time is a whole number, never
// negative, at most latest once in milliseconds.
func (w *OperationJSON) when(latest int64) (*When, error) {
	var when *When
	var first string
	for i, raw := range w.times() {
		t, text := timeMembers[i], string(*raw)
		if *raw == nil {
			continue
		}
		if when != nil {
			return nil, &Error{Code: EINVALID, Field: t.name,
				Message: fmt.Sprintf("give one time: %s and %s are both given", first, t.name)}
		}
		n, err := strconv.ParseInt(text, 10, 64)
		if errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(text, "-") {
			return nil, &Error{Code: EINVALID, Field: t.name, Err: ErrDeadlineTooLate,
				Message: fmt.Sprintf("%s %s is past the latest deadline (%d ms after the epoch)", t.name, text, latest)}
		}
		if err != nil {
			return nil, &Error{Code: EINVALID, Field: t.name,
				Message: fmt.Sprintf("%s must be a whole number, not %q", t.name, text)}
		}
		at, err := WhenFromParam(t.name, n, t.seconds, t.relative, latest)
		if err != nil {
			return nil, err
		}
		when, first = &at, t.name
	}
	return when, nil
}

// timeOr refuses a time given with the member that excludes one.
func timeOr(both bool, member string) error {
	if !both {
		return nil
	}
	return &Error{Code: EINVALID, Field: member, Message: fmt.Sprintf("give a time or %s, not both", member)}
}

// unquote reads by: a JSON string's text, or a number's.
func unquote(raw json.RawMessage) string {
	if text, err := strconv.Unquote(string(raw)); err == nil {
		return text
	}
	return string(raw)
}

// ParseFieldSetCondition reads setFields' FNX or FXX, in any case, or "".
func ParseFieldSetCondition(s string) (FieldSetCondition, error) {
	switch c := FieldSetCondition(upperASCII(s)); c {
	case SetFieldsAlways, SetIfNoFieldExist, SetIfAllExist:
		return c, nil
	}
	return "", &Error{Code: EINVALID, Field: "condition", Message: fmt.Sprintf("condition %q is not FNX or FXX", s)}
}

// parseSet reads the fields to set, a JSON object of strings. setIfAbsent
// sets exactly one.
func parseSet(data []byte, one bool) (Patch, error) {
	set, err := ParsePatchJSON(data)
	if err != nil {
		return nil, err
	}
	if one && len(set) != 1 {
		return nil, Errorf(EINVALID, "set-if-absent sets one field, as {\"name\":\"value\"}, not %d; set several with set-fields?condition=FNX", len(set))
	}
	for name, v := range set {
		if v == nil {
			return nil, &Error{Code: EINVALID, Field: name,
				Message: fmt.Sprintf("field %q is null; these routes set values (delete fields with get-delete or a PATCH)", name)}
		}
	}
	return set, nil
}

// MarshalJSON writes op as OperationJSON, which ParseOperationJSON reads
// back. A member its kind does not take is left out. FailAlone has no JSON
// form (EINVALID): over HTTP a transaction is all or nothing.
func (op Operation) MarshalJSON() ([]byte, error) {
	if op.FailAlone {
		return nil, &Error{Code: EINVALID, Field: "FailAlone", Message: "an operation's JSON form has no failAlone: over HTTP, a transaction is all or nothing"}
	}
	w := OperationJSON{Op: op.Op, Email: op.Email, Field: op.Field, To: op.To}
	if op.Create {
		w.Create = &op.Create
	}
	if op.AllowMissing {
		w.Missing = &op.AllowMissing
	}
	if op.Replace {
		w.Replace = &op.Replace
	}
	if op.Fields != nil {
		w.Fields = &op.Fields
	}
	var err error
	if op.Profile != nil {
		if w.Profile, err = json.Marshal(op.Profile); err != nil {
			return nil, err
		}
	}
	if op.Patch != nil {
		if w.Patch, err = json.Marshal(op.Patch); err != nil {
			return nil, err
		}
	}
	var when *When
	switch op.Op {
	case OpIncrement:
		w.By = json.RawMessage(strconv.Quote(strconv.FormatInt(op.By, 10)))
	case OpIncrementFloat:
		w.By = json.RawMessage(strconv.Quote(op.ByFloat))
	case OpExpire:
		when, w.Condition = &op.When, string(op.ExpireCond)
	case OpSetIfAbsent:
		w.Set, err = Patch{op.Field: &op.Value}.MarshalJSON()
		w.Field = ""
	case OpGetExpire:
		when = op.Expiry.When
		if op.Expiry.Persist {
			w.Persist = &op.Expiry.Persist
		}
	case OpSetFields:
		when, w.Condition = op.Expiry.When, string(op.FieldSet)
		if op.Expiry.KeepTTL {
			w.KeepTTL = &op.Expiry.KeepTTL
		}
		w.Set, err = op.Set.MarshalJSON()
	}
	if err != nil {
		return nil, err
	}
	if when != nil {
		ms := json.RawMessage(strconv.FormatInt(when.Millis, 10))
		if when.Relative {
			w.Milliseconds = ms
		} else {
			w.AtMilliseconds = ms
		}
	}
	ifMatch, ifNoneMatch := op.Cond.Values()
	if ifMatch != "" {
		w.IfMatch = &ifMatch
	}
	if ifNoneMatch != "" {
		w.IfNoneMatch = &ifNoneMatch
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads what MarshalJSON writes, as ParseOperationJSON does,
// so that an Operation survives encoding/json both ways.
func (op *Operation) UnmarshalJSON(data []byte) error {
	parsed, err := ParseOperationJSON(data)
	if err != nil {
		return err
	}
	*op = parsed
	return nil
}
