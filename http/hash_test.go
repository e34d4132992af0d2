package http_test

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// The Redis-hash semantics through raw HTTP, one step after another on one
// profile, with the exact reply bodies a client sees.
func TestRedisHashSemantics(t *testing.T) {
	srv, _ := newStartedServer(t, nil)
	u := srv.URL + base
	const q = "?emailAddress=ada@example.com"
	merge := []string{"Content-Type", "application/merge-patch+json"}
	type step struct {
		name   string
		method string
		path   string
		body   string
		header []string
		status int
		want   string // the exact JSON body, or a problem type
	}
	steps := []step{
		{"Create", "PUT", "/customer-profile", `{"emailAddress":"Ada@Example.com","fullName":"Ada","visits":"0","empty":""}`, nil, 201,
			`{"emailAddress":"ada@example.com","fullName":"Ada","empty":"","visits":"0"}`},
		{"ProjectionOrderMissingEmpty", "GET", "/customer-profile" + q + "&fields=visits,fullName,missing,empty", "", nil, 200,
			`{"visits":"0","fullName":"Ada","missing":null,"empty":""}`},
		{"ProjectionRepeatedField", "GET", "/customer-profile" + q + "&field=a,b&field=fullName", "", nil, 200,
			`{"a,b":null,"fullName":"Ada"}`},
		{"ErrProjectionDuplicate", "GET", "/customer-profile" + q + "&fields=a,a", "", nil, 400, "invalid"},
		{"ErrProjectionEmpty", "GET", "/customer-profile" + q + "&fields=", "", nil, 400, "invalid"},
		{"ErrProjectionOfMissingProfile", "GET", "/customer-profile?emailAddress=nobody@example.com&fields=a", "", nil, 404, "not-found"},
		{"PatchNewFieldsCount", "PATCH", "/customer-profile" + q, `{"nickname":"A","city":""}`, merge, 200,
			`{"profile":{"emailAddress":"ada@example.com","fullName":"Ada","city":"","empty":"","nickname":"A","visits":"0"},"fieldsAdded":2,"fieldsDeleted":0}`},
		{"PatchReplaceCountsZero", "PATCH", "/customer-profile" + q, `{"fullName":"Ada L"}`, merge, 200,
			`{"profile":{"emailAddress":"ada@example.com","fullName":"Ada L","city":"","empty":"","nickname":"A","visits":"0"},"fieldsAdded":0,"fieldsDeleted":0}`},
		{"PatchDeleteCounts", "PATCH", "/customer-profile" + q, `{"city":null,"absent":null,"empty":null}`, merge, 200,
			`{"profile":{"emailAddress":"ada@example.com","fullName":"Ada L","nickname":"A","visits":"0"},"fieldsAdded":0,"fieldsDeleted":2}`},
		{"PatchJSONContentType", "PATCH", "/customer-profile" + q, `{}`, []string{"Content-Type", "application/json; charset=utf-8"}, 200,
			`{"profile":{"emailAddress":"ada@example.com","fullName":"Ada L","nickname":"A","visits":"0"},"fieldsAdded":0,"fieldsDeleted":0}`},
		{"ErrPatchContentType", "PATCH", "/customer-profile" + q, `{}`, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "unsupported-media-type"},
		{"ErrPatchEmailDelete", "PATCH", "/customer-profile" + q, `{"emailAddress":null}`, merge, 400, "key-field"},
		{"ErrPatchEmailChange", "PATCH", "/customer-profile" + q, `{"emailAddress":"eve@example.com"}`, merge, 400, "key-field"},
		{"ErrPatchNumber", "PATCH", "/customer-profile" + q, `{"visits":1}`, merge, 400, "non-string-value"},
		{"ErrPatchMissingProfile", "PATCH", "/customer-profile?emailAddress=nobody@example.com", `{"a":"b"}`, merge, 404, "not-found"},
		{"IncrementExisting", "POST", "/customer-profile/increment" + q + "&field=visits&by=5", "", nil, 200,
			`{"emailAddress":"ada@example.com","field":"visits","value":"5","profile":{"emailAddress":"ada@example.com","fullName":"Ada L","nickname":"A","visits":"5"}}`},
		{"IncrementMissingFieldFromZero", "POST", "/customer-profile/increment" + q + "&field=logins&by=-3", "", nil, 200,
			`{"emailAddress":"ada@example.com","field":"logins","value":"-3","profile":{"emailAddress":"ada@example.com","fullName":"Ada L","logins":"-3","nickname":"A","visits":"5"}}`},
		{"IncrementDefaultByOne", "POST", "/customer-profile/increment" + q + "&field=logins", "", nil, 200,
			`{"emailAddress":"ada@example.com","field":"logins","value":"-2","profile":{"emailAddress":"ada@example.com","fullName":"Ada L","logins":"-2","nickname":"A","visits":"5"}}`},
		{"ErrIncrementNotInteger", "POST", "/customer-profile/increment" + q + "&field=nickname&by=1", "", nil, 409, "not-an-integer"},
		{"SetMax", "PATCH", "/customer-profile" + q, `{"big":"9223372036854775807"}`, merge, 200, ""},
		{"ErrIncrementOverflow", "POST", "/customer-profile/increment" + q + "&field=big&by=1", "", nil, 409, "overflow"},
		{"ErrIncrementByNotInt64", "POST", "/customer-profile/increment" + q + "&field=visits&by=9223372036854775808", "", nil, 400, "invalid"},
		{"ErrIncrementByFloat", "POST", "/customer-profile/increment" + q + "&field=visits&by=1.5", "", nil, 400, "invalid"},
		{"ErrIncrementNoField", "POST", "/customer-profile/increment" + q, "", nil, 400, "invalid"},
		{"ErrIncrementEmail", "POST", "/customer-profile/increment" + q + "&field=emailAddress", "", nil, 400, "key-field"},
		{"ErrIncrementMissingProfile", "POST", "/customer-profile/increment?emailAddress=nobody@example.com&field=v", "", nil, 404, "not-found"},
		{"Unchanged", "GET", "/customer-profile" + q + "&fields=visits,nickname,big", "", nil, 200,
			`{"visits":"5","nickname":"A","big":"9223372036854775807"}`},
		{"Partitions", "GET", "/partitions", "", nil, 200,
			`{"partitions":[{"name":"partition-562","profiles":1}],"partitionsInUse":1,"totalProfiles":1,"totalPartitions":1000,"indexes":["companyName","customerTier"]}`},
		{"List", "GET", "/customer-profiles?limit=5", "", nil, 200,
			`{"profiles":[{"emailAddress":"ada@example.com","fullName":"Ada L","big":"9223372036854775807","logins":"-2","nickname":"A","visits":"5"}],"nextCursor":null}`},
		{"ErrListLimit", "GET", "/customer-profiles?limit=0", "", nil, 400, "invalid"},
		{"ErrListLimitHuge", "GET", "/customer-profiles?limit=1001", "", nil, 400, "invalid"},
		{"ErrListCursor", "GET", "/customer-profiles?cursor=forged", "", nil, 400, "invalid"},
		{"Delete", "DELETE", "/customer-profile" + q, "", nil, 204, ""},
		{"ErrDeleteAgain", "DELETE", "/customer-profile" + q, "", nil, 404, "not-found"},
		{"PartitionGone", "GET", "/partitions", "", nil, 200, `{"partitions":[],"partitionsInUse":0,"totalProfiles":0,"totalPartitions":1000,"indexes":["companyName","customerTier"]}`},
	}
	for _, st := range steps {
		var body io.Reader
		if st.body != "" {
			body = strings.NewReader(st.body)
		}
		r := send(t, st.method, u+st.path, body, st.header...)
		if r.status != st.status {
			t.Fatalf("%s: got %d %s, want %d", st.name, r.status, r.body, st.status)
		}
		switch {
		case st.want == "":
		case strings.HasPrefix(st.want, "{"):
			if got := strings.TrimSpace(string(r.body)); got != st.want {
				t.Fatalf("%s:\n got %s\nwant %s", st.name, got, st.want)
			}
		default:
			if p := r.problem(t); p["type"] != "urn:partmap:problem:"+st.want {
				t.Fatalf("%s: got %v, want %s", st.name, p, st.want)
			}
		}
	}
}

func TestETags(t *testing.T) {
	srv, _ := newStartedServer(t, nil)
	u := srv.URL + base + "/customer-profile"
	const q = "?emailAddress=e@example.com"
	put := send(t, "PUT", u, strings.NewReader(`{"emailAddress":"e@example.com","n":"1"}`))
	e1 := put.header.Get("ETag")
	get := send(t, "GET", u+q, nil)
	proj := send(t, "GET", u+q+"&fields=n", nil)
	if e1 == "" || get.header.Get("ETag") != e1 || proj.header.Get("ETag") != e1 {
		t.Fatalf("ETags: PUT %q GET %q projection %q", e1, get.header.Get("ETag"), proj.header.Get("ETag"))
	}
	if r := send(t, "GET", u+q, nil, "If-None-Match", e1); r.status != 304 || len(r.body) != 0 {
		t.Fatalf("conditional GET: %d %s", r.status, r.body)
	}
	patch := send(t, "PATCH", u+q, strings.NewReader(`{"n":"2"}`), "Content-Type", "application/merge-patch+json", "If-Match", e1)
	e2 := patch.header.Get("ETag")
	if patch.status != 200 || e2 == "" || e2 == e1 {
		t.Fatalf("PATCH with If-Match: %d, ETag %q (was %q)", patch.status, e2, e1)
	}
	for _, r := range []response{
		send(t, "PATCH", u+q, strings.NewReader(`{"n":"3"}`), "Content-Type", "application/merge-patch+json", "If-Match", e1),
		send(t, "POST", u+"/increment"+q+"&field=n", nil, "If-Match", e1),
		send(t, "DELETE", u+q, nil, "If-Match", e1),
		send(t, "PUT", u, strings.NewReader(`{"emailAddress":"e@example.com"}`), "If-Match", e1),
		send(t, "PUT", u, strings.NewReader(`{"emailAddress":"e@example.com"}`), "If-None-Match", "*"),
	} {
		if p := r.problem(t); r.status != 412 || p["type"] != "urn:partmap:problem:precondition-failed" {
			t.Fatalf("stale condition: %d %v", r.status, p)
		}
	}
	var got map[string]string
	json.Unmarshal(send(t, "GET", u+q, nil).body, &got)
	if got["n"] != "2" {
		t.Fatalf("a failed precondition wrote: %v", got)
	}
	inc := send(t, "POST", u+"/increment"+q+"&field=n", nil, "If-Match", e2)
	if inc.status != 200 || inc.header.Get("ETag") == e2 {
		t.Fatalf("increment with If-Match: %d %s", inc.status, inc.header.Get("ETag"))
	}
	cur := inc.header.Get("ETag")
	// Tags that never match: weak, foreign, upper-case (strong comparison is
	// exact), zero, and a list without the current one.
	never := [][]string{
		{"If-Match", "W/" + cur}, {"If-Match", `"0000000000000000"`}, {"If-Match", `"not-ours"`},
		{"If-Match", `"0000000000000001", "0000000000000002"`}, {"If-Match", `"a,b", W/"c"`},
	}
	if upper := strings.ToUpper(cur); upper != cur { // a version of only digits has no case
		never = append(never, []string{"If-Match", upper})
	}
	for _, h := range never {
		if r := send(t, "PATCH", u+q, strings.NewReader(`{"x":"y"}`), "Content-Type", "application/merge-patch+json", h[0], h[1]); r.status != 412 {
			t.Fatalf("%s: %s: got %d %s, want 412", h[0], h[1], r.status, r.body)
		}
	}
	// A list that names the current version holds, on one line or several.
	if r := send(t, "PATCH", u+q, strings.NewReader(`{"x":"1"}`), "Content-Type", "application/merge-patch+json",
		"If-Match", `"0000000000000001", `+cur); r.status != 200 {
		t.Fatalf("If-Match list with the current tag: %d %s", r.status, r.body)
	}
	cur = send(t, "GET", u+q, nil).header.Get("ETag")
	if r := send(t, "PATCH", u+q, strings.NewReader(`{"x":"2"}`), "Content-Type", "application/merge-patch+json",
		"If-Match", `"0000000000000001"`, "If-Match", cur); r.status != 200 {
		t.Fatalf("If-Match over two lines: %d %s", r.status, r.body)
	}
	cur = send(t, "GET", u+q, nil).header.Get("ETag")
	if r := send(t, "GET", u+q, nil, "If-None-Match", `"0000000000000001", W/`+cur); r.status != 304 {
		t.Fatalf("GET with a weak If-None-Match of the current tag: %d", r.status)
	}
	if r := send(t, "GET", u+q, nil, "If-None-Match", `"0000000000000001"`); r.status != 200 {
		t.Fatalf("GET with a stale If-None-Match: %d", r.status)
	}
	if r := send(t, "GET", u+q, nil, "If-None-Match", "*"); r.status != 304 || len(r.body) != 0 {
		t.Fatalf("GET with If-None-Match: * of an existing profile: %d %s", r.status, r.body)
	}
	if r := send(t, "GET", u+q, nil, "If-None-Match", "0000000000000001"); r.status != 400 || r.header.Get("ETag") != "" {
		t.Fatalf("GET with a malformed If-None-Match: %d, ETag %q; want 400 without one", r.status, r.header.Get("ETag"))
	}
	// Malformed lists and a tag in a write's If-None-Match are refused.
	for _, h := range [][]string{{"If-Match", `"0000000000000001" ` + cur}, {"If-None-Match", `"0000000000000001"`}} {
		r := send(t, "PATCH", u+q, strings.NewReader(`{"x":"9"}`), "Content-Type", "application/merge-patch+json", h[0], h[1])
		if p := r.problem(t); r.status != 400 || p["type"] != "urn:partmap:problem:invalid" {
			t.Fatalf("%s: %s: got %d %v, want 400 invalid", h[0], h[1], r.status, p)
		}
	}
	if r := send(t, "DELETE", u+q, nil, "If-Match", "*"); r.status != 204 {
		t.Fatalf("DELETE If-Match *: %d %s", r.status, r.body)
	}
	if r := send(t, "PUT", u, strings.NewReader(`{"emailAddress":"e@example.com"}`), "If-None-Match", "*"); r.status != 201 {
		t.Fatalf("create-only of a deleted profile: %d %s", r.status, r.body)
	}
}
