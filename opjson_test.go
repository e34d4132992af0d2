package partmap_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/partmap/partmap"
)

// Every kind's Operation survives its JSON form.
func TestOperationJSONRoundTrip(t *testing.T) {
	v, at := "v", partmap.When{Millis: 2_000_000_000_000}
	for _, op := range []partmap.Operation{
		{Op: partmap.OpPut, Profile: partmap.Profile{"emailAddress": "a@example.com", "n": "1"}, Cond: partmap.Condition{IfNoneMatch: true}},
		{Op: partmap.OpPatch, Email: "a@example.com", Patch: partmap.Patch{"n": &v, "gone": nil}, Cond: partmap.IfMatch(1, 2)},
		{Op: partmap.OpIncrement, Email: "a@example.com", Field: "n", By: -9223372036854775808, Create: true},
		{Op: partmap.OpIncrement, Email: "a@example.com", Field: "n"},
		{Op: partmap.OpDelete, Email: "a@example.com", AllowMissing: true, Cond: partmap.Condition{IfExists: true}},
		{Op: partmap.OpRename, Email: "a@example.com", To: "b@example.com"},
		{Op: partmap.OpRename, Email: "a@example.com", To: "b@example.com", Replace: true},
		{Op: partmap.OpCopy, Email: "a@example.com", To: "b@example.com", Replace: true, Cond: partmap.Condition{IfExists: true}},
		{Op: partmap.OpGet, Email: "a@example.com", Fields: []string{"a", "b,c"}},
		{Op: partmap.OpExpire, Email: "a@example.com", Fields: []string{"a"}, When: partmap.When{Millis: 1500, Relative: true}, ExpireCond: partmap.ExpireIfSooner},
		{Op: partmap.OpExpire, Email: "a@example.com", When: at},
		{Op: partmap.OpPersist, Email: "a@example.com"},
		{Op: partmap.OpIncrementFloat, Email: "a@example.com", Field: "n", ByFloat: "0x1p3"},
		{Op: partmap.OpSetIfAbsent, Email: "a@example.com", Field: "x,y", Value: "1"},
		{Op: partmap.OpGetDelete, Email: "a@example.com", Fields: []string{"a"}},
		{Op: partmap.OpGetExpire, Email: "a@example.com", Fields: []string{"a"}, Expiry: partmap.FieldExpiry{When: &at}},
		{Op: partmap.OpGetExpire, Email: "a@example.com", Fields: []string{"a"}, Expiry: partmap.FieldExpiry{Persist: true}},
		{Op: partmap.OpSetFields, Email: "a@example.com", Set: partmap.Patch{"a": &v}, FieldSet: partmap.SetIfNoFieldExist, Expiry: partmap.FieldExpiry{KeepTTL: true}},
	} {
		t.Run(string(op.Op), func(t *testing.T) {
			data, err := op.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			got, err := partmap.ParseOperationJSON(data)
			if err != nil || !reflect.DeepEqual(got, op) {
				t.Fatalf("%s: got %+v, %v; want %+v", data, got, err, op)
			}
			// encoding/json both ways, as an operation inside another value.
			type line struct{ Op partmap.Operation }
			data, err = json.Marshal(line{op})
			var back line
			if err == nil {
				err = json.Unmarshal(data, &back)
			}
			if err != nil || !reflect.DeepEqual(back.Op, op) {
				t.Fatalf("%s: encoding/json gave %+v, %v; want %+v", data, back.Op, err, op)
			}
		})
	}
	if _, err := json.Marshal(partmap.Operation{Op: partmap.OpDelete, Email: "a@example.com", FailAlone: true}); partmap.ErrorCode(err) != partmap.EINVALID {
		t.Errorf("FailAlone in the JSON form: %v, want EINVALID", err)
	}
}

// A route's query spells the members a transaction spells in JSON; both
// read into the same Operation.
func TestOperationJSONSetText(t *testing.T) {
	fromJSON, err := partmap.ParseOperationJSON([]byte(`{"op":"setFields","emailAddress":"a@example.com","set":{"a":"1"},"condition":"fxx","seconds":60}`))
	if err != nil {
		t.Fatal(err)
	}
	m := partmap.OperationJSON{Op: partmap.OpSetFields, Email: "a@example.com", Set: []byte(`{"a":"1"}`)}
	for name, text := range map[string]string{"condition": "fxx", "seconds": "60", "keepTTL": ""} {
		if err := m.SetText(name, text); err != nil {
			t.Fatal(err)
		}
	}
	fromText, err := m.Operation()
	if err != nil || !reflect.DeepEqual(fromText, fromJSON) {
		t.Fatalf("from text %+v, %v; from JSON %+v", fromText, err, fromJSON)
	}
	if err := m.SetText("persist", "yes"); partmap.ErrorCode(err) != partmap.EINVALID {
		t.Errorf("persist=yes: %v", err)
	}
}

func TestParseOperationJSONErr(t *testing.T) {
	const a = `"emailAddress":"a@example.com"`
	for _, tc := range []struct {
		name, json string
		code       partmap.Code
		field      string
	}{
		{"ErrNotJSON", `{"op":`, partmap.EMALFORMEDJSON, ""},
		{"ErrUnknownMember", `{"op":"delete",` + a + `,"colour":"red"}`, partmap.EMALFORMEDJSON, ""},
		{"ErrUnknownOp", `{"op":"upsert",` + a + `}`, partmap.EINVALID, ""},
		{"ErrMemberOfAnotherKind", `{"op":"delete",` + a + `,"to":"b@example.com"}`, partmap.EINVALID, "to"},
		{"ErrReplaceOfAnotherKind", `{"op":"delete",` + a + `,"replace":true}`, partmap.EINVALID, "replace"},
		{"ErrCopyWithoutTo", `{"op":"copy",` + a + `}`, partmap.EINVALID, "to"},
		{"ErrTimeOfAnotherKind", `{"op":"persist",` + a + `,"seconds":1}`, partmap.EINVALID, "seconds"},
		{"ErrMissingMember", `{"op":"getDelete",` + a + `}`, partmap.EINVALID, "fields"},
		{"ErrMissingTime", `{"op":"expire",` + a + `}`, partmap.EINVALID, "seconds"},
		{"ErrTwoTimes", `{"op":"expire",` + a + `,"seconds":1,"at":1}`, partmap.EINVALID, "at"},
		{"ErrNegativeTime", `{"op":"expire",` + a + `,"milliseconds":-1}`, partmap.EINVALID, "milliseconds"},
		{"ErrFractionalTime", `{"op":"expire",` + a + `,"seconds":1.5}`, partmap.EINVALID, "seconds"},
		{"ErrTooLate", `{"op":"expire",` + a + `,"at":99999999999999999999}`, partmap.EINVALID, "at"},
		{"ErrExpireCondition", `{"op":"expire",` + a + `,"seconds":1,"condition":"FNX"}`, partmap.EINVALID, "condition"},
		{"ErrFieldSetCondition", `{"op":"setFields",` + a + `,"set":{"a":"1"},"condition":"NX"}`, partmap.EINVALID, "condition"},
		{"ErrTimeAndPersist", `{"op":"getExpire",` + a + `,"fields":["a"],"seconds":1,"persist":true}`, partmap.EINVALID, "persist"},
		{"ErrTimeAndKeepTTL", `{"op":"setFields",` + a + `,"set":{"a":"1"},"seconds":1,"keepTTL":true}`, partmap.EINVALID, "keepTTL"},
		{"ErrSetNull", `{"op":"setFields",` + a + `,"set":{"a":null}}`, partmap.EINVALID, "a"},
		{"ErrSetTwo", `{"op":"setIfAbsent",` + a + `,"set":{"a":"1","b":"2"}}`, partmap.EINVALID, ""},
		{"ErrBy", `{"op":"increment",` + a + `,"field":"n","by":1.5}`, partmap.EINVALID, "by"},
		{"ErrFloatBy", `{"op":"incrementFloat",` + a + `,"field":"n","by":"nope"}`, partmap.EINVALID, "by"},
		{"ErrIfMatch", `{"op":"delete",` + a + `,"ifMatch":"nope"}`, partmap.EINVALID, ""},
		{"ErrIfNoneMatchTag", `{"op":"delete",` + a + `,"ifNoneMatch":"\"0000000000000001\""}`, partmap.EINVALID, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := partmap.ParseOperationJSON([]byte(tc.json))
			var e *partmap.Error
			if partmap.ErrorCode(err) != tc.code || (tc.field != "" && (!errors.As(err, &e) || e.Field != tc.field)) {
				t.Fatalf("%v, want %s naming %q", err, tc.code, tc.field)
			}
		})
	}
}

// What ParseOperationJSON accepts, MarshalJSON writes so that it reads
// back the same.
func FuzzParseOperationJSON(f *testing.F) {
	for _, s := range []string{
		`{"op":"put","profile":{"emailAddress":"a@example.com"},"ifNoneMatch":"*"}`,
		`{"op":"increment","emailAddress":"a@example.com","field":"n","by":"-2","create":true,"ifMatch":"W/\"1\", \"0000000000000001\""}`,
		`{"op":"expire","emailAddress":"a@example.com","fields":[],"seconds":5,"condition":"gt"}`,
		`{"op":"getExpire","emailAddress":"a@example.com","fields":["a"],"at":1,"persist":false}`,
		`{"op":"setFields","emailAddress":"a@example.com","set":{"a":"\u00e9"},"condition":"fnx","keepTTL":true}`,
		`{"op":"incrementFloat","emailAddress":"a@example.com","field":"n","by":1.5e3}`,
		`{"op":"setIfAbsent","emailAddress":"a@example.com","set":{"x":"y"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		op, err := partmap.ParseOperationJSON(data)
		if err != nil {
			return
		}
		again, err := op.MarshalJSON()
		if err != nil {
			t.Fatalf("%s: %+v does not marshal: %v", data, op, err)
		}
		back, err := partmap.ParseOperationJSON(again)
		if err != nil || !reflect.DeepEqual(back, op) {
			t.Fatalf("%s → %+v → %s → %+v, %v", data, op, again, back, err)
		}
	})
}
