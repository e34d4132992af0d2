package partmap_test

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/partmap/partmap"
)

// An export's line is a profile, or a profile with its deadlines, and
// reads back as it was written.
func TestRecordJSON(t *testing.T) {
	alice := partmap.Profile{partmap.FieldEmail: "alice@example.com", "coupon": "X1", "note": "é \"q\""}
	for _, c := range []struct {
		name string
		rec  partmap.Record
		line string
	}{
		{"OKNoDeadlines", partmap.Record{Profile: alice}, `{"emailAddress":"alice@example.com","coupon":"X1","note":"é \"q\""}`},
		{"OKProfileDeadline", partmap.Record{Profile: alice, Deadlines: partmap.Deadlines{Profile: 1893456000000}},
			`{"profile":{"emailAddress":"alice@example.com","coupon":"X1","note":"é \"q\""},"expires":{"profile":1893456000000}}`},
		{"OKFieldDeadlines", partmap.Record{Profile: alice, Deadlines: partmap.Deadlines{Fields: map[string]int64{"note": 2, "coupon": 1<<48 - 1}}},
			`{"profile":{"emailAddress":"alice@example.com","coupon":"X1","note":"é \"q\""},"expires":{"fields":{"coupon":281474976710655,"note":2}}}`},
		{"OKBoth", partmap.Record{Profile: alice, Deadlines: partmap.Deadlines{Profile: 5, Fields: map[string]int64{"coupon": 3}}},
			`{"profile":{"emailAddress":"alice@example.com","coupon":"X1","note":"é \"q\""},"expires":{"profile":5,"fields":{"coupon":3}}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := partmap.MarshalRecordJSON(c.rec)
			if err != nil || string(got) != c.line {
				t.Fatalf("MarshalRecordJSON = %s, %v; want %s", got, err, c.line)
			}
			back, err := partmap.ParseRecordJSON(got)
			if err != nil || !reflect.DeepEqual(back, c.rec) {
				t.Fatalf("ParseRecordJSON = %+v, %v; want %+v", back, err, c.rec)
			}
		})
	}

	// Spacing and member order are free; a missing expires is none.
	for _, in := range []string{
		` { "expires" : { "fields" : { "coupon" : 3 } , "profile" : 5 } , "profile" : {"emailAddress":"a@b","coupon":"1"} } `,
		`{"profile":{"emailAddress":"a@b","coupon":"1"},"expires":{"profile":5,"fields":{"coupon":3}}}`,
	} {
		rec, err := partmap.ParseRecordJSON([]byte(in))
		want := partmap.Record{Profile: partmap.Profile{partmap.FieldEmail: "a@b", "coupon": "1"}, Deadlines: partmap.Deadlines{Profile: 5, Fields: map[string]int64{"coupon": 3}}}
		if err != nil || !reflect.DeepEqual(rec, want) {
			t.Errorf("ParseRecordJSON(%s) = %+v, %v", in, rec, err)
		}
	}
	if rec, err := partmap.ParseRecordJSON([]byte(`{"profile":{"emailAddress":"a@b"},"expires":{}}`)); err != nil || !rec.Deadlines.IsZero() {
		t.Errorf("empty expires: %+v, %v", rec, err)
	}

	for _, c := range []struct {
		name, in string
		code     partmap.Code
		says     string
	}{
		{"ErrBareNonString", `{"emailAddress":"a@b","n":1}`, partmap.ENONSTRING, `"n"`},
		{"ErrProfileBesideEmail", `{"emailAddress":"a@b","profile":{"x":"y"}}`, partmap.EMALFORMEDJSON, `"emailAddress"`},
		{"ErrUnknownMember", `{"profile":{"emailAddress":"a@b"},"expire":{"profile":5}}`, partmap.EMALFORMEDJSON, `"expire"`},
		{"ErrInnerProfile", `{"profile":{"emailAddress":"a@b","n":1}}`, partmap.ENONSTRING, `"n"`},
		{"ErrInnerUTF8", "{\"profile\":{\"emailAddress\":\"a@b\",\"n\":\"\xff\"}}", partmap.EINVALIDUTF8, `"n"`},
		{"ErrExpiresNotObject", `{"profile":{"emailAddress":"a@b"},"expires":5}`, partmap.EMALFORMEDJSON, "expires is a number"},
		{"ErrExpiresMember", `{"profile":{"emailAddress":"a@b"},"expires":{"when":5}}`, partmap.EMALFORMEDJSON, `"when"`},
		{"ErrProfileDeadlineNotInteger", `{"profile":{"emailAddress":"a@b"},"expires":{"profile":1.5}}`, partmap.EMALFORMEDJSON, "expires.profile"},
		{"ErrProfileDeadlineString", `{"profile":{"emailAddress":"a@b"},"expires":{"profile":"5"}}`, partmap.EMALFORMEDJSON, "expires.profile"},
		{"ErrFieldsNotObject", `{"profile":{"emailAddress":"a@b"},"expires":{"fields":[]}}`, partmap.EMALFORMEDJSON, "expires.fields is an array"},
		{"ErrFieldDeadline", `{"profile":{"emailAddress":"a@b","c":"1"},"expires":{"fields":{"c":true}}}`, partmap.EMALFORMEDJSON, "expires.fields.c"},
		{"ErrFieldDeadlineTooBig", `{"profile":{"emailAddress":"a@b","c":"1"},"expires":{"fields":{"c":99999999999999999999}}}`, partmap.EMALFORMEDJSON, "expires.fields.c"},
		{"ErrSyntax", `{"profile":{"emailAddress":"a@b"},"expires":{`, partmap.EMALFORMEDJSON, "malformed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := partmap.ParseRecordJSON([]byte(c.in))
			if partmap.ErrorCode(err) != c.code || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("ParseRecordJSON(%s) = %v, want %s saying %s", c.in, err, c.code, c.says)
			}
		})
	}
}

// Deadlines.Check allows what a store can keep with the profile.
func TestDeadlinesCheck(t *testing.T) {
	p := partmap.Profile{partmap.FieldEmail: "a@b", "c": "1"}
	for _, c := range []struct {
		name string
		d    partmap.Deadlines
		code partmap.Code
	}{
		{"OKNone", partmap.Deadlines{}, ""},
		{"OKPassed", partmap.Deadlines{Profile: 1, Fields: map[string]int64{"c": 1}}, ""},
		// A profile's deadline may be as late as an int64 holds, as a
		// Redis key's; a field's as Redis's field deadlines.
		{"OKLatest", partmap.Deadlines{Profile: math.MaxInt64, Fields: map[string]int64{"c": partmap.MaxFieldDeadline}}, ""},
		{"ErrProfileNegative", partmap.Deadlines{Profile: -1}, partmap.EINVALID},
		{"ErrFieldZero", partmap.Deadlines{Fields: map[string]int64{"c": 0}}, partmap.EINVALID},
		{"ErrFieldTooLate", partmap.Deadlines{Fields: map[string]int64{"c": partmap.MaxFieldDeadline + 1}}, partmap.EINVALID},
		{"ErrMissingField", partmap.Deadlines{Fields: map[string]int64{"d": 5}}, partmap.EINVALID},
		{"ErrEmail", partmap.Deadlines{Fields: map[string]int64{partmap.FieldEmail: 5}}, partmap.EKEYFIELD},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.d.Check(p); partmap.ErrorCode(err) != c.code && !(c.code == "" && err == nil) {
				t.Fatalf("Check(%+v) = %v, want %q", c.d, err, c.code)
			}
		})
	}
}
