package search_test

import (
	"math"
	"strings"
	"testing"
	"unicode"

	"pgregory.net/rapid"

	"github.com/partmap/partmap/internal/search"
)

func TestMatch(t *testing.T) {
	ann := map[string]string{
		"emailAddress": "ann@example.com",
		"fullName":     "Ann Lee-Smith",
		"notes":        "Running late; called twice about the REFUNDS.",
		"code":         "running",
		"customerTier": "Gold, Early Adopter",
		"orders":       "12",
		"first name":   "Ann",
	}
	for _, tt := range []struct {
		name, query string
		profile     map[string]string
		want        bool
	}{
		{"OKAll", "*", ann, true},
		{"OKAllOfEmpty", "*", map[string]string{}, true},
		{"OKWord", "ann", ann, true},
		{"OKWordFolded", "LEE", ann, true},
		{"OKWordAfterHyphen", "smith", ann, true},
		{"OKWordEscapedHyphenIsNotThere", `lee\-smith`, ann, false},
		{"OKWordMissing", "bob", ann, false},
		{"OKWordInAnyTextField", "twice", ann, true},
		{"OKWordNotInTags", "gold", ann, false},
		{"OKWordNotInNumbers", "12", ann, false},
		{"OKWordStemOfValue", "run", ann, true},
		{"OKWordSharesStem", "runs", ann, true},
		{"OKWordStemmedToValue", "refund", ann, true},
		{"OKWordStemmedNotStopword", "calling", ann, true},
		{"OKWordNoStemField", "@code:runs", ann, false},
		{"OKWordNoStemFieldExact", "@code:running", ann, true},
		{"OKWordInField", "@notes:late", ann, true},
		{"OKWordInOtherField", "@fullName:late", ann, false},
		{"OKWordEscapedField", `@first\ name:ann`, ann, true},
		{"OKPrefix", "refu*", ann, true},
		{"OKPrefixWholeWord", "refunds*", ann, true},
		{"OKPrefixNotOfStem", "refund*", ann, true},
		{"OKPrefixLonger", "refundsx*", ann, false},
		{"OKPrefixInField", "@fullName:sm*", ann, true},
		{"OKPrefixInOtherField", "@code:sm*", ann, false},
		{"OKPrefixDoesNotReachStems", "happi*", map[string]string{"notes": "happy"}, false},
		{"OKWordReachesStems", "happiness", map[string]string{"notes": "happy"}, true},
		{"OKTag", "@customerTier:{gold}", ann, true},
		{"OKTagFolded", "@customerTier:{GOLD}", ann, true},
		{"OKTagWithSpace", `@customerTier:{early\ adopter}`, ann, true},
		{"OKTagWordsJoined", "@customerTier:{early adopter}", ann, true},
		{"OKTagPart", "@customerTier:{early}", ann, false},
		{"OKTagAny", "@customerTier:{silver|gold}", ann, true},
		{"OKTagNone", "@customerTier:{silver|bronze}", ann, false},
		{"OKTagMissing", "@customerTier:{gold}", map[string]string{"notes": "gold"}, false},
		{"OKRange", "@orders:[10 20]", ann, true},
		{"OKRangeInclusive", "@orders:[12 12]", ann, true},
		{"OKRangeExclusiveMin", "@orders:[(12 20]", ann, false},
		{"OKRangeExclusiveMax", "@orders:[1 (12]", ann, false},
		{"OKRangeOutside", "@orders:[13 +inf]", ann, false},
		{"OKRangeInfinite", "@orders:[-inf +inf]", ann, true},
		{"OKRangeOfInf", "@orders:[1e308 +inf]", map[string]string{"orders": "inf"}, true},
		{"OKRangeOfNegativeZero", "@orders:[0 0]", map[string]string{"orders": "-0"}, true},
		{"OKRangeNotANumber", "@orders:[-inf +inf]", map[string]string{"orders": "twelve"}, false},
		{"OKRangeMissing", "@orders:[-inf +inf]", map[string]string{}, false},
		{"OKAnd", "ann @customerTier:{gold} @orders:[10 +inf]", ann, true},
		{"OKAndOneFails", "ann @customerTier:{silver}", ann, false},
		{"OKOr", "bob | ann", ann, true},
		{"OKOrNone", "bob | carol", ann, false},
		{"OKNot", "-bob", ann, true},
		{"OKNotOfMatch", "-ann", ann, false},
		{"OKNotOfMissingField", "-@customerTier:{gold}", map[string]string{}, true},
		{"OKNotInGroup", "@notes:(late -refunds)", ann, false},
		{"OKPrecedence", "bob ann | lee", ann, true},
		{"OKPrecedenceFails", "bob (ann | lee)", ann, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n, err := search.Parse(desk, tt.query)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := search.Match(desk, n, tt.profile), tt.want; got != want {
				t.Fatalf("%s: got %v, want %v", n, got, want)
			}
		})
	}
}

// A schema's tag options hold in queries as in values.
func TestMatchTagOptions(t *testing.T) {
	cased := mustSchema([]search.Field{{Name: "t", Type: search.TypeTag}}, search.Options{CaseSensitive: true, Separator: ';'})
	for _, tt := range []struct {
		name, query, value string
		want               bool
	}{
		{"OKCaseKept", "@t:{Gold}", "Gold;Silver", true},
		{"OKOtherCase", "@t:{gold}", "Gold;Silver", false},
		{"OKSeparator", "@t:{Silver}", " Gold ; Silver ", true},
		{"OKCommaIsNoSeparator", `@t:{a\,b}`, "a,b;c", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n, err := search.Parse(cased, tt.query)
			if err != nil {
				t.Fatal(err)
			}
			if got := search.Match(cased, n, map[string]string{"t": tt.value}); got != tt.want {
				t.Fatalf("%s on %q: got %v, want %v", n, tt.value, got, tt.want)
			}
		})
	}
}

// Nodes a parser never makes still have a meaning a planner can rely on.
func TestMatchBuiltNodes(t *testing.T) {
	p := map[string]string{"orders": "5", "notes": "hello"}
	for _, tt := range []struct {
		name string
		node search.Node
		want bool
	}{
		{"OKEmptyAnd", search.And{}, true},
		{"OKEmptyOr", search.Or{}, false},
		{"OKNaNRange", search.Range{Field: "orders", Min: math.NaN(), Max: math.NaN()}, false},
		{"OKNil", nil, false},
		{"OKTermOfUnknownField", search.Term{Field: "nope", Word: "hello"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := search.Match(desk, tt.node, p); got != tt.want {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// The query side and the index side tokenise alike: every word of a value,
// written in a query with its separators escaped, finds the value, and so
// does every prefix of it; written with its separators as they are, the
// value's own text finds it too, field by field, stop words aside.
func TestQueryWordsMeetIndexedWords(t *testing.T) {
	alphabet := []rune("abcABCéÉßσΣ_019 \t\n\u00a0-.,:|@*(){}\\\"'\x01")
	rapid.Check(t, func(t *rapid.T) {
		value := string(rapid.SliceOfN(rapid.SampledFrom(alphabet), 0, 20).Draw(t, "value"))
		field := rapid.SampledFrom([]string{"notes", "code"}).Draw(t, "field")
		profile := map[string]string{field: value}
		for _, term := range desk.Terms(field, value) {
			if strings.HasPrefix(term, search.StemPrefix) {
				continue
			}
			q := "@" + field + ":" + escape(term)
			n, err := search.Parse(desk, q)
			if err != nil {
				t.Fatalf("term %q: %s: %v", term, q, err)
			}
			if !search.Match(desk, n, profile) {
				t.Fatalf("term %q of %q: %s does not match", term, value, n)
			}
			if r := []rune(term); len(r) >= search.MinPrefix {
				q := "@" + field + ":" + escape(string(r[:search.MinPrefix])) + "*"
				if n, err := search.Parse(desk, q); err != nil || !search.Match(desk, n, profile) {
					t.Fatalf("prefix of %q: %s: %v, %v", term, q, n, err)
				}
			}
		}
	})
}

// escape writes a word for a query: every character that is not a letter
// or digit after a backslash, which a query word may always do.
func escape(word string) string {
	var b strings.Builder
	for _, r := range word {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
