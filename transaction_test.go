package partmap_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/partmap/partmap"
)

// nonZero sets v to a value other than its zero.
func nonZero(t *testing.T, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(1)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Field(i).CanSet() {
				nonZero(t, v.Field(i))
				return
			}
		}
		t.Fatalf("no settable member in %s", v.Type())
	default:
		t.Fatalf("no non-zero value for a %s", v.Kind())
	}
}

// Every kind refuses each member it does not take, naming it, and takes
// its own; the members' table is built once, so a member added to
// Operation is checked without a change here.
func TestCheckMembers(t *testing.T) {
	takes := map[partmap.OpKind][]string{
		partmap.OpPut:            {"Email", "Profile"},
		partmap.OpPatch:          {"Email", "Patch"},
		partmap.OpIncrement:      {"Email", "Field", "By", "Create"},
		partmap.OpDelete:         {"Email", "AllowMissing"},
		partmap.OpRename:         {"Email", "To", "Replace"},
		partmap.OpCopy:           {"Email", "To", "Replace"},
		partmap.OpGet:            {"Email", "Fields"},
		partmap.OpExpire:         {"Email", "Fields", "When", "ExpireCond"},
		partmap.OpPersist:        {"Email", "Fields"},
		partmap.OpIncrementFloat: {"Email", "Field", "ByFloat", "Create"},
		partmap.OpSetIfAbsent:    {"Email", "Field", "Value"},
		partmap.OpGetDelete:      {"Email", "Fields"},
		partmap.OpGetExpire:      {"Email", "Fields", "Expiry"},
		partmap.OpSetFields:      {"Email", "Set", "FieldSet", "Expiry"},
	}
	always := map[string]bool{"Op": true, "Cond": true, "FailAlone": true}
	typ := reflect.TypeFor[partmap.Operation]()
	for kind, own := range takes {
		for i := range typ.NumField() {
			name := typ.Field(i).Name
			if always[name] {
				continue
			}
			op := partmap.Operation{Op: kind}
			nonZero(t, reflect.ValueOf(&op).Elem().Field(i))
			err := op.CheckMembers()
			taken := false
			for _, m := range own {
				taken = taken || m == name
			}
			var pe *partmap.Error
			switch {
			case taken && err != nil && errors.As(err, &pe) && pe.Field == name:
				t.Errorf("%s refused its own member %s: %v", kind, name, err)
			case !taken && (!errors.As(err, &pe) || pe.Code != partmap.EINVALID || pe.Field != name):
				t.Errorf("%s with %s set: got %v, want EINVALID naming %s", kind, name, err, name)
			}
		}
	}
	var pe *partmap.Error
	if err := (partmap.Operation{Op: "frobnicate"}).CheckMembers(); !errors.As(err, &pe) || pe.Code != partmap.EINVALID {
		t.Errorf("an unknown kind: got %v, want EINVALID", err)
	}
}
