package partmap

import "context"

// The commonest operations, each one Store.Apply with the semantics and
// errors Transact documents for its kind.

// UpsertProfile replaces the whole profile whose key is p's emailAddress,
// or creates it, and reports which. The stored emailAddress is canonical.
func UpsertProfile(ctx context.Context, s Store, p Profile, cond Condition) (rec Record, created bool, err error) {
	res, err := s.Apply(ctx, Operation{Op: OpPut, Profile: p, Cond: cond})
	if err != nil {
		return Record{}, false, err
	}
	return *res.Record, res.Created, nil
}

// PatchProfile applies a merge patch to an existing profile: only the
// named fields change. It counts the fields that did not exist before
// (like HSET) and those that existed and were removed (like HDEL);
// replacing a value adds 0 and is not an error. A patch that changes
// nothing writes nothing and keeps the version. A missing profile is
// ENOTFOUND; deleting or changing emailAddress is EKEYFIELD.
func PatchProfile(ctx context.Context, s Store, email string, patch Patch, cond Condition) (PatchResult, error) {
	res, err := s.Apply(ctx, Operation{Op: OpPatch, Email: email, Patch: patch, Cond: cond})
	if err != nil {
		return PatchResult{}, err
	}
	return PatchResult{Record: *res.Record, FieldsAdded: res.FieldsAdded, FieldsDeleted: res.FieldsDeleted}, nil
}

// IncrementField adds by to an integer field atomically, like HINCRBY: a
// missing field starts from 0. A stored value that is not a canonical
// int64 decimal is ENOTINTEGER and a result outside int64 is EOVERFLOW;
// either leaves the value unchanged. A missing profile is ENOTFOUND;
// emailAddress is EKEYFIELD.
func IncrementField(ctx context.Context, s Store, email, field string, by int64, cond Condition) (Increment, error) {
	res, err := s.Apply(ctx, Operation{Op: OpIncrement, Email: email, Field: field, By: by, Cond: cond})
	if err != nil {
		return Increment{}, err
	}
	return Increment{Email: res.Email, Field: field, Value: res.Value, Version: res.Record.Version}, nil
}

// DeleteProfile removes email's profile. A missing one is ENOTFOUND. A
// partition whose last profile is deleted stops existing.
func DeleteProfile(ctx context.Context, s Store, email string, cond Condition) error {
	_, err := s.Apply(ctx, Operation{Op: OpDelete, Email: email, Cond: cond})
	return err
}

// RenameProfile moves the profile of from to the email to, in one atomic
// step that locks both partitions: no reader sees both emails, or
// neither (a batch lookup on Redis can: see FindProfiles). The moved
// profile gets to as its emailAddress and a new version; counts, index
// entries and partitions follow. A missing from is ENOTFOUND, an existing
// to is EEXISTS, and two emails with one canonical form are EINVALID.
// cond applies to from's profile.
func RenameProfile(ctx context.Context, s Store, from, to string, cond Condition) (Record, error) {
	res, err := s.Apply(ctx, Operation{Op: OpRename, Email: from, To: to, Cond: cond})
	if err != nil {
		return Record{}, err
	}
	return *res.Record, nil
}
