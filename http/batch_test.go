package http_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// The batch route refuses a bad request whole, with a problem that names
// the offending item by its index and value, and answers up to a thousand
// emails, in order, with null for the missing ones.
func TestBatchGetRoute(t *testing.T) {
	srv, _ := newStartedServer(t, nil)
	url := srv.URL + base + "/customer-profiles/get"
	if r := send(t, "PUT", srv.URL+base+"/customer-profile", strings.NewReader(`{"emailAddress":"alice@example.com","fullName":"Alice","empty":""}`)); r.status != 201 {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	emails := func(n int) string {
		list := make([]string, n)
		for i := range list {
			list[i] = fmt.Sprintf(`"u%d@example.com"`, i)
		}
		list[n-1] = `"ALICE@example.com"`
		return `{"emails":[` + strings.Join(list, ",") + `]}`
	}

	t.Run("OK", func(t *testing.T) {
		// A missing Content-Type is taken as JSON, as on the other routes.
		r := send(t, "POST", url, strings.NewReader(emails(1000)))
		if r.status != 200 {
			t.Fatalf("1000 emails: %d %s", r.status, r.body)
		}
		var reply struct {
			Profiles []map[string]string
			ETags    []*string
		}
		if err := json.Unmarshal(r.body, &reply); err != nil {
			t.Fatal(err)
		}
		if len(reply.Profiles) != 1000 || len(reply.ETags) != 1000 {
			t.Fatalf("1000 emails: %d profiles, %d etags", len(reply.Profiles), len(reply.ETags))
		}
		for i := range 999 {
			if reply.Profiles[i] != nil || reply.ETags[i] != nil {
				t.Fatalf("answer %d: %v %v, want null for a missing profile", i, reply.Profiles[i], reply.ETags[i])
			}
		}
		etag := send(t, "GET", srv.URL+base+"/customer-profile?emailAddress=alice@example.com", nil).header.Get("ETag")
		if last := reply.Profiles[999]; last["fullName"] != "Alice" || reply.ETags[999] == nil || *reply.ETags[999] != etag {
			t.Fatalf("answer 999: %v %v, want Alice with ETag %s", last, reply.ETags[999], etag)
		}
		r = send(t, "POST", url, strings.NewReader(`{"fields":["empty","nickname"],"emails":["nobody@example.com","alice@example.com"]}`), "Content-Type", "application/json; charset=utf-8")
		tag, _ := json.Marshal(etag) // in the body, the header's value as a JSON string
		if want := `{"profiles":[null,{"empty":"","nickname":null}],"etags":[null,` + string(tag) + `]}` + "\n"; r.status != 200 || string(r.body) != want {
			t.Fatalf("projection: %d %s, want %s", r.status, r.body, want)
		}
	})

	for _, tc := range []struct {
		name, body string
		status     int
		typ        string
		says       string
	}{
		{"ErrTooMany", emails(1001), 400, "invalid", "1001 emails in one batch read; the limit is 1000"},
		{"ErrEmpty", `{"emails":[]}`, 400, "invalid", "at least one email"},
		{"ErrNoEmails", `{"fields":["fullName"]}`, 400, "invalid", "names no emails"},
		{"ErrBadEmail", `{"emails":["alice@example.com","ok@example.com","b\u00e9d@example.com"]}`, 400, "invalid-email", `emails[2] "b\u00e9d@example.com": email address must be ASCII`},
		{"ErrBlankEmail", `{"emails":["alice@example.com","  "]}`, 400, "invalid-email", `emails[1] "  "`},
		{"ErrLongEmail", `{"emails":["` + strings.Repeat("a", 400) + `"]}`, 413, "too-large", `emails[0] "aaaa`},
		{"ErrRepeatedField", `{"emails":["alice@example.com"],"fields":["fullName","x","fullName"]}`, 400, "invalid", `fields[2] "fullName" is named twice (first as fields[0])`},
		{"ErrEmptyFields", `{"emails":["alice@example.com"],"fields":[]}`, 400, "invalid", "fields is empty"},
		{"ErrEmptyFieldName", `{"emails":["alice@example.com"],"fields":["a",""]}`, 400, "invalid", "fields[1] is an empty field name"},
		{"ErrLoneSurrogate", `{"emails":["alice@example.com"],"fields":["a","\ud800"]}`, 400, "invalid-utf8", `fields[1] "\\ud800" contains the escaped lone surrogate`},
		{"ErrRawBytes", "{\"emails\":[\"alice@example.com\"],\"fields\":[\"\xff\"]}", 400, "invalid-utf8", `fields[0] "\xff" contains bytes that are not valid UTF-8`},
		{"ErrNotAString", `{"emails":["alice@example.com",42]}`, 400, "malformed-json", "emails[1] is a number"},
		{"ErrFieldsNull", `{"emails":["alice@example.com"],"fields":null}`, 400, "malformed-json", "fields is null"},
		{"ErrUnknownMember", `{"emails":["alice@example.com"],"email":["x"]}`, 400, "malformed-json", `unknown member "email"`},
		{"ErrRepeatedMember", `{"emails":["alice@example.com"],"emails":["bob@example.com"]}`, 400, "malformed-json", "appears more than once"},
		{"ErrNotJSON", `emails=alice@example.com`, 400, "malformed-json", "malformed JSON"},
		{"ErrNotAnObject", `["alice@example.com"]`, 400, "malformed-json", "expected a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := send(t, "POST", url, strings.NewReader(tc.body), "Content-Type", "application/json")
			p := r.problem(t)
			if r.status != tc.status || p["type"] != "urn:partmap:problem:"+tc.typ || !strings.Contains(fmt.Sprint(p["detail"]), tc.says) {
				t.Fatalf("got %d %s, want %d %s saying %s", r.status, r.body, tc.status, tc.typ, tc.says)
			}
			if _, answered := p["profiles"]; answered {
				t.Fatalf("a refused batch answered: %s", r.body)
			}
		})
	}
	if r := send(t, "POST", url+"?fields=a", strings.NewReader(emails(1))); r.status != 400 || !strings.Contains(string(r.body), "unknown query parameter") {
		t.Fatalf("a query parameter: %d %s", r.status, r.body)
	}
	if r := send(t, "POST", url, strings.NewReader(emails(1)), "Content-Type", "application/x-www-form-urlencoded"); r.status != 415 {
		t.Fatalf("a form: %d %s", r.status, r.body)
	}
}
