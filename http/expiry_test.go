package http_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
)

// expiryServer is a started server with alice's profile {a, b, n}.
func expiryServer(t *testing.T) (srvURL string, c *pmhttp.Client) {
	t.Helper()
	srv, _ := newStartedServer(t, nil)
	if r := send(t, "PUT", srv.URL+base+"/customer-profile", strings.NewReader(`{"emailAddress":"alice@example.com","a":"1","b":"2","n":"5"}`)); r.status != 201 {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	return srv.URL, newClient(t, srv.URL, nil)
}

// post sends a POST to a route of customer-profile with query q.
func post(t *testing.T, srvURL, route, q, body string, header ...string) response {
	t.Helper()
	var r *strings.Reader
	if body != "" {
		r = strings.NewReader(body)
		header = append(header, "Content-Type", "application/json")
	} else {
		r = strings.NewReader("")
	}
	return send(t, "POST", srvURL+base+"/customer-profile/"+route+"?"+q, r, header...)
}

func decode[T any](t *testing.T, r response) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("reply %d %s: %v", r.status, r.body, err)
	}
	return v
}

type codeReply struct {
	EmailAddress string
	Results      []struct {
		Field string
		Code  int
	}
	Profile map[string]string
}

func TestExpireRoute(t *testing.T) {
	srvURL, _ := expiryServer(t)
	const alice = "emailAddress=alice@example.com"

	r := post(t, srvURL, "expire", alice+"&fields=a,nope&seconds=100", "")
	got := decode[codeReply](t, r)
	if r.status != 200 || r.header.Get("ETag") == "" || len(got.Results) != 2 ||
		got.Results[0].Field != "a" || got.Results[0].Code != 1 || got.Results[1].Field != "nope" || got.Results[1].Code != -2 ||
		got.Profile["a"] != "1" {
		t.Fatalf("expire: %d %s", r.status, r.body)
	}
	etag := r.header.Get("ETag")
	r = post(t, srvURL, "expire", alice+"&field=a&milliseconds=5000&condition=nx", "")
	if got := decode[codeReply](t, r); got.Results[0].Code != 0 || r.header.Get("ETag") != etag {
		t.Fatalf("expire NX over a deadline: %s (ETag %s, was %s)", r.body, r.header.Get("ETag"), etag)
	}

	// Read back: the field's deadline and time to live, the codes of the
	// others, and the server's clock.
	r = send(t, "GET", srvURL+base+"/customer-profile/ttl?"+alice+"&fields=a,b,nope", nil)
	ttl := decode[struct {
		EmailAddress string
		Now          int64
		Profile      map[string]int64
		Fields       []map[string]any
	}](t, r)
	if r.status != 200 || r.header.Get("ETag") != etag || ttl.EmailAddress != "alice@example.com" || ttl.Profile["code"] != -1 || len(ttl.Fields) != 3 {
		t.Fatalf("ttl: %d %s", r.status, r.body)
	}
	if a := ttl.Fields[0]; a["field"] != "a" || a["deadline"].(float64)-float64(ttl.Now) != a["ttl"].(float64) || a["ttl"].(float64) <= 90_000 || a["ttl"].(float64) > 100_000 {
		t.Errorf("ttl of a: %v, now %d", a, ttl.Now)
	}
	if b, nope := ttl.Fields[1], ttl.Fields[2]; b["code"] != -1.0 || nope["code"] != -2.0 || b["deadline"] != nil {
		t.Errorf("ttl of b and nope: %v %v", b, nope)
	}
	if r := send(t, "GET", srvURL+base+"/customer-profile/ttl?"+alice, nil, "If-None-Match", etag); r.status != 304 {
		t.Errorf("ttl with If-None-Match of its version: %d", r.status)
	}

	// A time in the past deletes the field at once: GET no longer has it.
	r = post(t, srvURL, "expire", alice+"&fields=b&at=1", "")
	if got := decode[codeReply](t, r); got.Results[0].Code != 2 || got.Profile["b"] != "" {
		t.Fatalf("expire at a past time: %s", r.body)
	}
	r = send(t, "GET", srvURL+base+"/customer-profile?"+alice, nil)
	if p := decode[map[string]string](t, r); len(p) != 3 || p["b"] != "" {
		t.Fatalf("GET after expiring b: %s", r.body)
	}

	// The profile's own deadline, then persist.
	r = post(t, srvURL, "expire", alice+"&atMilliseconds="+itoa(time.Now().Add(time.Hour).UnixMilli()), "")
	if got := decode[codeReply](t, r); len(got.Results) != 1 || got.Results[0].Field != "" || got.Results[0].Code != 1 {
		t.Fatalf("expire the profile: %s", r.body)
	}
	r = send(t, "GET", srvURL+base+"/customer-profile/ttl?"+alice, nil)
	if p := decode[struct{ Profile map[string]int64 }](t, r).Profile; p["ttl"] <= 3500_000 || p["deadline"] == 0 {
		t.Errorf("ttl of the profile: %s", r.body)
	}
	r = post(t, srvURL, "persist", alice, "")
	if got := decode[codeReply](t, r); got.Results[0].Code != 1 {
		t.Fatalf("persist the profile: %s", r.body)
	}
	r = post(t, srvURL, "persist", alice+"&fields=a,n,b", "")
	if got := decode[codeReply](t, r); got.Results[0].Code != 1 || got.Results[1].Code != -1 || got.Results[2].Code != -2 {
		t.Fatalf("persist fields: %s", r.body)
	}

	// Conditions, a missing profile.
	if r := post(t, srvURL, "expire", alice+"&fields=a&seconds=1", "", "If-Match", `"0000000000000001"`); r.status != 412 {
		t.Errorf("expire with a stale If-Match: %d %s", r.status, r.body)
	}
	etag = send(t, "GET", srvURL+base+"/customer-profile?"+alice, nil).header.Get("ETag")
	if r := post(t, srvURL, "expire", alice+"&fields=a&seconds=1", "", "If-Match", etag); r.status != 200 {
		t.Errorf("expire with the current If-Match: %d %s", r.status, r.body)
	}
	const nobody = "emailAddress=nobody@example.com"
	for _, r := range []response{
		post(t, srvURL, "expire", nobody+"&seconds=1", ""),
		post(t, srvURL, "persist", nobody, ""),
		send(t, "GET", srvURL+base+"/customer-profile/ttl?"+nobody, nil),
		post(t, srvURL, "get-delete", nobody+"&fields=a", ""),
		post(t, srvURL, "get-expire", nobody+"&fields=a", ""),
	} {
		if r.status != 404 {
			t.Errorf("missing profile: %d %s", r.status, r.body)
		}
	}
}

func itoa(n int64) string { return strings.TrimSpace(string(must(json.Marshal(n)))) }

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestHashRoutes(t *testing.T) {
	srvURL, _ := expiryServer(t)
	const alice = "emailAddress=alice@example.com"
	type setReply struct {
		EmailAddress string
		Field        string
		Set          *bool
		Profile      map[string]string
	}

	// set-if-absent: HSETNX; on a missing profile it creates it.
	r := post(t, srvURL, "set-if-absent", alice, `{"a":"x"}`)
	if got := decode[setReply](t, r); r.status != 200 || got.Set == nil || *got.Set || got.Field != "a" || got.Profile["a"] != "1" {
		t.Fatalf("set-if-absent on a present field: %d %s", r.status, r.body)
	}
	r = post(t, srvURL, "set-if-absent", alice, `{"c":"3"}`)
	if got := decode[setReply](t, r); r.status != 200 || !*got.Set || got.Profile["c"] != "3" {
		t.Fatalf("set-if-absent: %d %s", r.status, r.body)
	}
	r = post(t, srvURL, "set-if-absent", "emailAddress=New@example.com", `{"c":"3"}`)
	if got := decode[setReply](t, r); r.status != 201 || !*got.Set || r.header.Get("Location") == "" || got.Profile["emailAddress"] != "new@example.com" {
		t.Fatalf("set-if-absent creating: %d %s", r.status, r.body)
	}
	if r := post(t, srvURL, "set-if-absent", alice, `{"d":"4"}`, "If-None-Match", "*"); r.status != 412 {
		t.Errorf("set-if-absent with If-None-Match on a profile that exists: %d %s", r.status, r.body)
	}

	// get-delete: HGETDEL.
	r = post(t, srvURL, "get-delete", alice+"&fields=c,nope", "")
	if vals := decode[struct {
		Values  map[string]*string
		Profile map[string]string
	}](t, r); r.status != 200 || *vals.Values["c"] != "3" || vals.Values["nope"] != nil || len(vals.Values) != 2 || vals.Profile["c"] != "" {
		t.Fatalf("get-delete: %d %s", r.status, r.body)
	}
	if !strings.Contains(string(r.body), `"values":{"c":"3","nope":null}`) {
		t.Errorf("get-delete's values are not in the order asked: %s", r.body)
	}

	// get-expire: HGETEX, then a past time deletes.
	r = post(t, srvURL, "get-expire", alice+"&fields=a&seconds=60", "")
	if r.status != 200 || !strings.Contains(string(r.body), `"values":{"a":"1"}`) {
		t.Fatalf("get-expire: %d %s", r.status, r.body)
	}
	r = post(t, srvURL, "get-expire", alice+"&fields=a&persist=true", "")
	if r.status != 200 {
		t.Fatalf("get-expire persist: %d %s", r.status, r.body)
	}
	r = post(t, srvURL, "get-expire", alice+"&fields=a,n&atMilliseconds=1", "")
	if r.status != 200 || !strings.Contains(string(r.body), `"values":{"a":"1","n":"5"}`) || strings.Contains(string(r.body), `"profile":{"a"`) {
		t.Fatalf("get-expire at a past time: %d %s", r.status, r.body)
	}

	// set-fields: HSETEX.
	r = post(t, srvURL, "set-fields", alice+"&condition=FXX", `{"b":"9","z":"1"}`)
	if got := decode[setReply](t, r); r.status != 200 || *got.Set || got.Profile["z"] != "" {
		t.Fatalf("set-fields FXX with a missing field: %d %s", r.status, r.body)
	}
	r = post(t, srvURL, "set-fields", alice+"&condition=fnx&seconds=100", `{"y":"1","z":"2"}`)
	if got := decode[setReply](t, r); r.status != 200 || !*got.Set || got.Profile["z"] != "2" {
		t.Fatalf("set-fields FNX: %d %s", r.status, r.body)
	}
	r = send(t, "GET", srvURL+base+"/customer-profile/ttl?"+alice+"&fields=y", nil)
	if !strings.Contains(string(r.body), `"ttl":`) {
		t.Errorf("set-fields with seconds set no deadline: %s", r.body)
	}
	r = post(t, srvURL, "set-fields", alice+"&keepTTL=true", `{"y":"3"}`)
	if r.status != 200 {
		t.Fatalf("set-fields keepTTL: %d %s", r.status, r.body)
	}
	r = send(t, "GET", srvURL+base+"/customer-profile/ttl?"+alice+"&fields=y", nil)
	if !strings.Contains(string(r.body), `"ttl":`) {
		t.Errorf("set-fields with keepTTL dropped the deadline: %s", r.body)
	}
	r = post(t, srvURL, "set-fields", "emailAddress=other@example.com", `{"y":"3"}`)
	if r.status != 201 || r.header.Get("ETag") == "" {
		t.Fatalf("set-fields creating: %d %s", r.status, r.body)
	}
}

// A bad parameter is 400 and names the parameter.
func TestExpiryRoutesErrBadInput(t *testing.T) {
	srvURL, _ := expiryServer(t)
	const alice = "emailAddress=alice@example.com"
	for _, tc := range []struct {
		route, query, body, param string
		code                      partmap.Code
	}{
		{"expire", "&fields=a&seconds=-1", "", "seconds", partmap.EINVALID},
		{"expire", "&fields=a&milliseconds=soon", "", "milliseconds", partmap.EINVALID},
		{"expire", "&fields=a&seconds=1.5", "", "seconds", partmap.EINVALID},
		{"expire", "&fields=a&at=99999999999999999999", "", "at", partmap.EINVALID},
		{"expire", "&fields=a&at=281474976710656", "", "at", partmap.EINVALID},
		{"expire", "&fields=a&atMilliseconds=281474976710656", "", "atMilliseconds", partmap.EINVALID},
		{"expire", "&fields=a&seconds=1&milliseconds=1", "", "milliseconds", partmap.EINVALID},
		{"expire", "&fields=a&seconds=1&seconds=2", "", "seconds", partmap.EINVALID},
		{"expire", "&fields=a", "", "seconds", partmap.EINVALID},
		{"expire", "&fields=a&seconds=1&condition=SOON", "", "condition", partmap.EINVALID},
		{"expire", "&fields=a,,b&seconds=1", "", "", partmap.EINVALID},
		{"expire", "&fields=a,a&seconds=1", "", "a", partmap.EINVALID},
		{"expire", "&fields=%FF&seconds=1", "", "", partmap.EINVALIDUTF8},
		{"expire", "&fields=emailAddress&seconds=1", "", "emailAddress", partmap.EKEYFIELD},
		{"get-delete", "", "", "fields", partmap.EINVALID},
		{"get-expire", "&fields=a&seconds=1&persist=true", "", "persist", partmap.EINVALID},
		{"get-expire", "&fields=a&persist=yes", "", "persist", partmap.EINVALID},
		{"set-fields", "&keepTTL=1", `{"a":"1"}`, "keepTTL", partmap.EINVALID},
		{"set-fields", "&keepTTL=true&seconds=1", `{"a":"1"}`, "keepTTL", partmap.EINVALID},
		{"set-fields", "&condition=NX", `{"a":"1"}`, "condition", partmap.EINVALID},
		{"set-fields", "", `{"a":null}`, "a", partmap.EINVALID},
		{"set-fields", "", `{"a":1}`, "a", partmap.ENONSTRING},
		{"set-if-absent", "", `{"a":"1","b":"2"}`, "", partmap.EINVALID},
		{"increment", "&field=n&by=1.5", "", "by", partmap.EINVALID},
		{"increment", "&field=n&float=yes", "", "float", partmap.EINVALID},
	} {
		t.Run(tc.route+tc.query, func(t *testing.T) {
			r := post(t, srvURL, tc.route, alice+tc.query, tc.body)
			if r.status != 400 {
				t.Fatalf("%d %s", r.status, r.body)
			}
			p := r.problem(t)
			if p["type"] != pmhttp.ProblemTypePrefix+string(tc.code) || (tc.param != "" && p["field"] != tc.param) {
				t.Errorf("problem %s, want %s naming %q", r.body, tc.code, tc.param)
			}
		})
	}
}

func TestIncrementFloatRoute(t *testing.T) {
	srvURL, c := expiryServer(t)
	const alice = "emailAddress=alice@example.com"
	r := post(t, srvURL, "increment", alice+"&field=n&by=0.5&float=true", "")
	if got := decode[map[string]any](t, r); r.status != 200 || got["value"] != "5.5" || r.header.Get("ETag") == "" {
		t.Fatalf("increment by 0.5: %d %s", r.status, r.body)
	}
	r = post(t, srvURL, "increment", alice+"&field=n&by=nope&float=true", "")
	if p := r.problem(t); r.status != 400 || p["field"] != "by" {
		t.Errorf("increment by nope: %d %s", r.status, r.body)
	}
	res, err := c.Apply(t.Context(), partmap.Operation{Op: partmap.OpIncrementFloat, Email: "alice@example.com", Field: "n", ByFloat: "1.5"})
	if err != nil || res.FloatValue != "7" || res.Record == nil {
		t.Errorf("Apply incrementFloat: %+v, %v", res, err)
	}
}

// The client's Apply and Deadlines answer as the store does.
func TestClientApply(t *testing.T) {
	_, c := expiryServer(t)
	ctx := t.Context()
	const alice = "alice@example.com"
	res, err := c.Apply(ctx, partmap.Operation{Op: partmap.OpExpire, Email: alice, Fields: []string{"a", "nope"}, When: partmap.In(time.Minute)})
	if err != nil || !reflect.DeepEqual(res.Codes, []int{1, -2}) || res.Record == nil || res.Record.Profile["a"] != "1" || res.Email != alice {
		t.Fatalf("expire: %+v %v", res, err)
	}
	ttls, err := c.Deadlines(ctx, "ALICE@example.com", []string{"a", "b", "nope"})
	if err != nil || ttls.Profile != -1 || ttls.Deadlines[1] != -1 || ttls.Deadlines[2] != -2 || ttls.Version != res.Record.Version ||
		ttls.TTL(ttls.Deadlines[0]) <= 50_000 || ttls.TTL(ttls.Deadlines[0]) > 60_000 {
		t.Fatalf("deadlines: %+v %v", ttls, err)
	}
	ttls, err = c.Deadlines(ctx, alice, nil)
	if err != nil || ttls.Profile != -1 || len(ttls.Deadlines) != 0 || ttls.Now == 0 {
		t.Fatalf("deadlines of the profile alone: %+v %v", ttls, err)
	}
	res, err = c.Apply(ctx, partmap.Operation{Op: partmap.OpPersist, Email: alice})
	if err != nil || !reflect.DeepEqual(res.Codes, []int{-1}) {
		t.Fatalf("persist: %+v %v", res, err)
	}
	res, err = c.Apply(ctx, partmap.Operation{Op: partmap.OpSetIfAbsent, Email: "b,c@example.com", Field: "x,y", Value: "1"})
	if err != nil || !res.Set || !res.Created || res.Record.Profile["x,y"] != "1" {
		t.Fatalf("setIfAbsent: %+v %v", res, err)
	}
	res, err = c.Apply(ctx, partmap.Operation{Op: partmap.OpGetDelete, Email: alice, Fields: []string{"nope", "b"}})
	if err != nil || res.Values[0] != nil || *res.Values[1] != "2" || res.Record.Profile["b"] != "" {
		t.Fatalf("getDelete: %+v %v", res, err)
	}
	at := partmap.At(time.Now().Add(time.Hour))
	res, err = c.Apply(ctx, partmap.Operation{Op: partmap.OpGetExpire, Email: alice, Fields: []string{"n"}, Expiry: partmap.FieldExpiry{When: &at}})
	if err != nil || *res.Values[0] != "5" {
		t.Fatalf("getExpire: %+v %v", res, err)
	}
	v1 := "1"
	res, err = c.Apply(ctx, partmap.Operation{Op: partmap.OpSetFields, Email: alice, Set: partmap.Patch{"n": &v1}, FieldSet: partmap.SetIfAllExist,
		Expiry: partmap.FieldExpiry{KeepTTL: true}, Cond: partmap.Condition{IfMatch: []partmap.Version{res.Record.Version}}})
	if err != nil || !res.Set || res.Created || res.Record.Profile["n"] != "1" {
		t.Fatalf("setFields: %+v %v", res, err)
	}
	if ttls, err := c.Deadlines(ctx, alice, []string{"n"}); err != nil || ttls.Deadlines[0] != at.Millis {
		t.Fatalf("setFields with keepTTL: %+v %v", ttls, err)
	}
	if _, err := c.Apply(ctx, partmap.Operation{Op: partmap.OpPersist, Email: "nobody@example.com"}); partmap.ErrorCode(err) != partmap.ENOTFOUND {
		t.Fatalf("persist of nobody: %v", err)
	}
	// The existing kinds answer as the store does.
	res, err = c.Apply(ctx, partmap.Operation{Op: partmap.OpIncrement, Email: alice, Field: "n", By: 2})
	if err != nil || res.Value != 3 || res.Record == nil || res.Record.Version == 0 {
		t.Fatalf("increment: %+v %v", res, err)
	}
	res, err = c.Apply(ctx, partmap.Operation{Op: partmap.OpRename, Email: alice, To: "al@example.com"})
	if err != nil || res.Email != "al@example.com" || res.Record.Profile["n"] != "3" {
		t.Fatalf("rename: %+v %v", res, err)
	}
	if ttls, err := c.Deadlines(ctx, "al@example.com", []string{"n"}); err != nil || ttls.Deadlines[0] != at.Millis {
		t.Fatalf("a rename keeps deadlines: %+v %v", ttls, err)
	}
}

func TestTransactionExpiryKinds(t *testing.T) {
	srvURL, c := expiryServer(t)
	tx := func(ops ...string) response {
		return send(t, "POST", srvURL+base+"/transactions", strings.NewReader(`{"operations":[`+strings.Join(ops, ",")+`]}`), "Content-Type", "application/json")
	}
	const a = `"emailAddress":"alice@example.com"`
	r := tx(`{"op":"expire",`+a+`,"fields":["a"],"seconds":100,"condition":"NX"}`,
		`{"op":"persist",`+a+`,"fields":["a","n"]}`,
		`{"op":"setIfAbsent","emailAddress":"new@example.com","set":{"c":"3"}}`,
		`{"op":"getDelete",`+a+`,"fields":["b","nope"]}`,
		`{"op":"getExpire",`+a+`,"fields":["n"],"milliseconds":60000}`,
		`{"op":"setFields",`+a+`,"set":{"y":"1"},"condition":"FNX","keepTTL":true}`,
		`{"op":"expire",`+a+`,"atMilliseconds":1}`)
	if r.status != 200 {
		t.Fatalf("transaction: %d %s", r.status, r.body)
	}
	reply := decode[struct{ Results []map[string]any }](t, r)
	want := []string{
		`"results":[{"field":"a","code":1}]`,
		`"results":[{"field":"a","code":1},{"field":"n","code":-1}]`,
		`"status":201`,
		`"values":{"b":"2","nope":null}`,
		`"values":{"n":"5"}`,
		`"set":true`,
		`"results":[{"code":2}]`,
	}
	for i, res := range reply.Results {
		b, _ := json.Marshal(res)
		line := strings.NewReplacer(`"code":1,"field":"a"`, `"field":"a","code":1`, `"code":-1,"field":"n"`, `"field":"n","code":-1`).Replace(string(b))
		if !strings.Contains(line, want[i]) {
			t.Errorf("result %d: %s, want %s", i+1, line, want[i])
		}
	}
	if r := send(t, "GET", srvURL+base+"/customer-profile?emailAddress=alice@example.com", nil); r.status != 404 {
		t.Errorf("after expiring the profile at a past time: %d %s", r.status, r.body)
	}

	// Strict members, as the other kinds have.
	for _, op := range []string{
		`{"op":"expire",` + a + `}`,
		`{"op":"expire",` + a + `,"seconds":1,"milliseconds":1}`,
		`{"op":"expire",` + a + `,"seconds":-1}`,
		`{"op":"expire",` + a + `,"seconds":1.5}`,
		`{"op":"persist",` + a + `,"seconds":1}`,
		`{"op":"getDelete",` + a + `}`,
		`{"op":"getDelete",` + a + `,"fields":["a"],"set":{"a":"1"}}`,
		`{"op":"getExpire",` + a + `,"fields":["a"],"seconds":1,"persist":true}`,
		`{"op":"setIfAbsent",` + a + `,"set":{"a":"1","b":"2"}}`,
		`{"op":"setIfAbsent",` + a + `,"field":"a","set":{"a":"1"}}`,
		`{"op":"setFields",` + a + `,"set":{"a":"1"},"condition":"NX"}`,
		`{"op":"setFields",` + a + `,"set":{"a":"1"},"persist":true}`,
		`{"op":"incrementFloat",` + a + `,"field":"n"}`,
	} {
		if r := tx(op); r.status != 400 {
			t.Errorf("%s: %d %s", op, r.status, r.body)
		}
	}

	// The client sends and reads the new kinds.
	at := partmap.At(time.Now().Add(time.Hour))
	v := "v"
	results, err := c.Transact(t.Context(), []partmap.Operation{
		{Op: partmap.OpSetFields, Email: "tx@example.com", Set: partmap.Patch{"f": &v, "g": &v}, Expiry: partmap.FieldExpiry{When: &at}},
		{Op: partmap.OpExpire, Email: "tx@example.com", Fields: []string{"g"}, When: partmap.In(time.Minute), ExpireCond: partmap.ExpireIfSooner},
		{Op: partmap.OpGetExpire, Email: "tx@example.com", Fields: []string{"f"}, Expiry: partmap.FieldExpiry{Persist: true}},
		{Op: partmap.OpGetDelete, Email: "tx@example.com", Fields: []string{"g", "h"}},
		{Op: partmap.OpSetIfAbsent, Email: "tx@example.com", Field: "g", Value: "w"},
		{Op: partmap.OpPersist, Email: "tx@example.com", Fields: []string{"f"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := results[0]; !r.Set || !r.Created || r.Record == nil {
		t.Errorf("setFields: %+v", r)
	}
	if r := results[1]; !reflect.DeepEqual(r.Codes, []int{1}) {
		t.Errorf("expire LT: %+v", r)
	}
	if r := results[2]; len(r.Values) != 1 || *r.Values[0] != "v" {
		t.Errorf("getExpire: %+v", r)
	}
	if r := results[3]; len(r.Values) != 2 || *r.Values[0] != "v" || r.Values[1] != nil {
		t.Errorf("getDelete: %+v", r)
	}
	if r := results[4]; !r.Set || r.Created || r.Record.Profile["g"] != "w" {
		t.Errorf("setIfAbsent: %+v", r)
	}
	if r := results[5]; !reflect.DeepEqual(r.Codes, []int{-1}) {
		t.Errorf("persist after getExpire's persist: %+v", r)
	}

	// partmap.ParseOperationJSON and TransactionResultLines, as partmap tx
	// uses them, read and write the new kinds the same way.
	op, err := partmap.ParseOperationJSON([]byte(`{"op":"getExpire",` + a + `,"fields":["x"],"at":2000000000}`))
	if err != nil || op.Expiry.When == nil || op.Expiry.When.Millis != 2_000_000_000_000 || op.Expiry.When.Relative {
		t.Fatalf("ParseOperationJSON: %+v %v", op, err)
	}
	lines, err := pmhttp.TransactionResultLines([]partmap.Operation{op}, []partmap.OperationResult{{Op: op.Op, Email: "alice@example.com", Values: []*string{nil}}})
	if err != nil || !strings.Contains(string(lines[0]), `"values":{"x":null}`) {
		t.Fatalf("TransactionResultLines: %s %v", lines, err)
	}
}
