package partmap

import (
	"fmt"
	"reflect"
	"slices"
)

// MaxTransactionOps bounds the profiles one transaction (Store.Transact)
// names, since it locks their partitions for as long as it runs, and the
// operations of one where a client lists them (the transaction route,
// partmap tx). MaxTransactionSteps bounds the operations of any: a Redis
// client's MULTI may queue many commands on a few profiles.
const (
	MaxTransactionOps   = 100
	MaxTransactionSteps = 10_000
)

// OpKind names what one operation of a transaction does.
type OpKind string

const (
	OpPut       OpKind = "put"       // replace or create a whole profile, as UpsertProfile
	OpPatch     OpKind = "patch"     // a merge patch, as PatchProfile
	OpIncrement OpKind = "increment" // add to an integer field, as IncrementField
	OpDelete    OpKind = "delete"    // remove a profile, as DeleteProfile
	OpRename    OpKind = "rename"    // move a profile to another email, as RenameProfile
	OpCopy      OpKind = "copy"      // copy a profile, deadlines included, to another email, as COPY
	OpGet       OpKind = "get"       // read a profile, or some of its fields, as HGETALL and HMGET; writes nothing

	// Expiry and the rest of Redis's hash commands (expiry.go). Each is
	// also its own HTTP route; the Go API runs them as one-operation
	// transactions (Do).
	OpExpire         OpKind = "expire"         // set deadlines: HPEXPIREAT on Fields, or EXPIRE on the profile
	OpPersist        OpKind = "persist"        // remove deadlines: HPERSIST on Fields, or PERSIST on the profile
	OpIncrementFloat OpKind = "incrementFloat" // add a decimal to a field, as HINCRBYFLOAT
	OpSetIfAbsent    OpKind = "setIfAbsent"    // set a field the profile lacks, as HSETNX
	OpGetDelete      OpKind = "getDelete"      // read fields and delete them, as HGETDEL
	OpGetExpire      OpKind = "getExpire"      // read fields and set or remove their deadlines, as HGETEX
	OpSetFields      OpKind = "setFields"      // set fields with deadlines and conditions, as HSETEX
)

// Operation is one step of a transaction. Which fields count depends on
// Op; the others must be zero.
type Operation struct {
	Op OpKind
	// Email is the profile the operation acts on. A put takes it from
	// Profile's emailAddress instead, and leaves Email empty.
	Email   string
	Profile Profile // put: the whole new profile
	Patch   Patch   // patch
	Field   string  // increment, incrementFloat, setIfAbsent: the field
	By      int64   // increment: the amount
	To      string  // rename, copy: the new email
	// Replace makes a rename or copy onto an existing To replace that
	// profile, as RENAME and COPY ... REPLACE do; without it, an existing
	// To is EEXISTS.
	Replace bool
	// Create makes an increment or incrementFloat of a missing profile
	// create it, holding only emailAddress and the field, as HINCRBY
	// creates its key; without it a missing profile is ENOTFOUND.
	Create bool
	// AllowMissing makes a delete of a missing profile succeed, writing
	// nothing, as DEL does; the result's Deleted says which happened.
	AllowMissing bool

	// Fields are the fields an expire, persist, getDelete, getExpire or
	// get acts on. A field named twice is acted on in turn, as Redis does:
	// a persist of a, a answers 1 then -1, a getDelete the value then nil
	// (the HTTP client refuses it: FieldsOnce). An expire or persist
	// without fields acts on the profile's own deadline, and a get without
	// fields reads the whole profile.
	Fields []string
	// Value is setIfAbsent's value; ByFloat incrementFloat's amount, a
	// decimal as Redis parses it.
	Value, ByFloat string
	// When is an expire's deadline, and ExpireCond its NX, XX, GT or LT.
	When       When
	ExpireCond ExpireCondition
	// Set is setFields' values (a Patch without deletions), FieldSet its
	// FNX or FXX, and Expiry what setFields and getExpire do to the
	// touched fields' deadlines.
	Set      Patch
	FieldSet FieldSetCondition
	Expiry   FieldExpiry
	// Cond must hold for the profile, as this transaction's earlier
	// operations left it, or nothing of the transaction is written.
	Cond Condition
	// FailAlone confines a failure of this operation to it, unless it is
	// its Cond's or the store's own (EINTERNAL, EUNAVAILABLE,
	// ELOCKCONFLICT): the operation writes nothing, its result's Err says
	// why, and the transaction goes on, as a command that fails inside
	// Redis's EXEC. Apply returns the error as ever. The HTTP client
	// refuses it (EINVALID): the transaction route does not carry it.
	FailAlone bool
}

// OperationResult is what one operation did, as the single-profile call
// would have answered it.
type OperationResult struct {
	Op    OpKind
	Email string // the canonical email; a rename's or copy's new one
	// Record is the profile after the operation (put, patch, increment,
	// rename, copy: the new one), or as a get read it; nil after a delete,
	// for a get of a missing profile, and after an operation of Redis's
	// that deleted the profile: an expire with a time now or past, or one
	// that took its last field but emailAddress, as Redis deletes an
	// emptied hash.
	Record  *Record
	Created bool // put, or increment with Create: the profile was new
	Deleted bool // delete: a profile was deleted (false only with AllowMissing)
	// FieldsAdded and FieldsDeleted count a patch's changes; FieldsAdded
	// also the fields setFields added (HSET's reply).
	FieldsAdded, FieldsDeleted int
	Value                      int64 // increment: the field's new value

	// Codes are an expire's or persist's replies, one per field (or one
	// for the profile), Redis's: see ExpiryNoField and its siblings.
	Codes []int
	// Values are what getDelete, getExpire and a get of Fields read, one
	// per field, nil for a missing one (every one, for a missing profile).
	Values []*string
	// FloatValue is incrementFloat's new value, as stored.
	FloatValue string
	// Set says that setIfAbsent or setFields wrote their fields.
	Set bool
	// Err is the failure of an operation with FailAlone, which wrote
	// nothing; the other members are then zero but Op and Email.
	Err error
}

// members are the Operation fields each kind takes, beside Op, Cond and
// FailAlone.
var members = map[OpKind][]string{
	OpPut:            {"Email", "Profile"},
	OpPatch:          {"Email", "Patch"},
	OpIncrement:      {"Email", "Field", "By", "Create"},
	OpDelete:         {"Email", "AllowMissing"},
	OpRename:         {"Email", "To", "Replace"},
	OpCopy:           {"Email", "To", "Replace"},
	OpGet:            {"Email", "Fields"},
	OpExpire:         {"Email", "Fields", "When", "ExpireCond"},
	OpPersist:        {"Email", "Fields"},
	OpIncrementFloat: {"Email", "Field", "ByFloat", "Create"},
	OpSetIfAbsent:    {"Email", "Field", "Value"},
	OpGetDelete:      {"Email", "Fields"},
	OpGetExpire:      {"Email", "Fields", "Expiry"},
	OpSetFields:      {"Email", "Set", "FieldSet", "Expiry"},
}

// untaken lists, for each kind, the Operation members it does not take
// (by index and name), so that CheckMembers reflects on no struct type
// per call: it runs for every command of every pipeline.
var untaken = func() map[OpKind][]member {
	t := reflect.TypeFor[Operation]()
	out := make(map[OpKind][]member, len(members))
	for kind, take := range members {
		for i := range t.NumField() {
			name := t.Field(i).Name
			if name != "Op" && name != "Cond" && name != "FailAlone" && !slices.Contains(take, name) {
				out[kind] = append(out[kind], member{i, name})
			}
		}
	}
	return out
}()

type member struct {
	index int
	name  string
}

// CheckMembers refuses an operation that sets a member its kind does not
// take (EINVALID, naming it), so that a caller's mistake is never quietly
// dropped: a keepTTL on a getExpire, say. An unknown kind is EINVALID too.
func (op Operation) CheckMembers() error {
	others, ok := untaken[op.Op]
	if !ok {
		return Errorf(EINVALID, "unknown operation %q: it is put, patch, increment, delete, rename, copy, get, expire, persist, incrementFloat, setIfAbsent, getDelete, getExpire or setFields", op.Op)
	}
	v := reflect.ValueOf(&op).Elem()
	for _, m := range others {
		if !v.Field(m.index).IsZero() {
			return &Error{Code: EINVALID, Field: m.name, Message: fmt.Sprintf("a %s operation takes no %s", op.Op, m.name)}
		}
	}
	switch {
	case op.Op == OpGetExpire && op.Expiry.KeepTTL:
		return &Error{Code: EINVALID, Field: "keepTTL", Message: "getExpire takes a time or persist, never keepTTL"}
	case op.Op == OpSetFields && op.Expiry.Persist:
		return &Error{Code: EINVALID, Field: "persist", Message: "setFields takes a time or keepTTL, never persist"}
	}
	return nil
}
