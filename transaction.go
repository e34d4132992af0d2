package partmap

// MaxTransactionOps bounds one transaction (Store.Transact): it locks the
// partitions of every profile it names for as long as it runs.
const MaxTransactionOps = 100

// OpKind names what one operation of a transaction does.
type OpKind string

const (
	OpPut       OpKind = "put"       // replace or create a whole profile, as UpsertProfile
	OpPatch     OpKind = "patch"     // a merge patch, as PatchProfile
	OpIncrement OpKind = "increment" // add to an integer field, as IncrementField
	OpDelete    OpKind = "delete"    // remove a profile, as DeleteProfile
	OpRename    OpKind = "rename"    // move a profile to another email, as RenameProfile
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
	Field   string  // increment: the field
	By      int64   // increment: the amount
	To      string  // rename: the new email
	// Cond must hold for the profile, as this transaction's earlier
	// operations left it, or nothing of the transaction is written.
	Cond Condition
}

// OperationResult is what one operation did, as the single-profile call
// would have answered it.
type OperationResult struct {
	Op    OpKind
	Email string // the canonical email; a rename's new one
	// Record is the profile after the operation (put, patch, increment,
	// rename); nil after a delete.
	Record  *Record
	Created bool // put: the profile was new
	// FieldsAdded and FieldsDeleted count a patch's changes.
	FieldsAdded, FieldsDeleted int
	Value                      int64 // increment: the field's new value
}
