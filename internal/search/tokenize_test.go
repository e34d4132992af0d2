package search_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/partmap/partmap/internal/search"
)

// stem writes a stemmed term as Terms returns it.
func stem(s string) string { return search.StemPrefix + s }

func TestTerms(t *testing.T) {
	noStop := mustSchema([]search.Field{{Name: "t"}}, search.Options{Stopwords: []string{}})
	custom := mustSchema([]search.Field{{Name: "t"}}, search.Options{Stopwords: []string{"Foo", "bar"}})
	for _, tt := range []struct {
		name   string
		schema *search.Schema
		field  string
		value  string
		want   []string
	}{
		{"OKWords", desk, "code", "hello world", []string{"hello", "world"}},
		{"OKSortedWithoutRepeats", desk, "code", "c b c C", []string{"b", "c"}},
		{"OKPunctuationSeparates", desk, "code", "foo-bar.baz...bag", []string{"bag", "bar", "baz", "foo"}},
		{"OKEverySeparator", desk, "code", "a,b.c<d>e{f}g[h]i\"j'k:l;m!n@o#p$q%r^s&t*u(v)w-x+y=z~0/1|2?3`4", strings.Split("0 1 2 3 4 b c d e f g h i j k l m n o p q r s t u v w x y z", " ")},
		{"OKUnderscoreJoins", desk, "code", "hello_world", []string{"hello_world"}},
		{"OKEscapedSeparator", desk, "code", `hello\-world hello-world`, []string{"hello", "hello-world", "world"}},
		{"OKEscapedSpace", desk, "code", `new\ york`, []string{"new york"}},
		{"OKEscapedBackslash", desk, "code", `a\\b`, []string{`a\b`}},
		{"OKEscapedBackslashThenSeparator", desk, "code", `a\\,b`, []string{`a\`, "b"}},
		{"OKBackslashBeforeLetterDropped", desk, "code", `ab\cd`, []string{"abcd"}},
		{"OKTrailingBackslashDropped", desk, "code", `ab\`, []string{"ab"}},
		{"OKWhiteSpaceSeparates", desk, "code", "one\ttwo\nthree\r\nfour\u00a0five\u3000six", []string{"five", "four", "one", "six", "three", "two"}},
		{"OKControlCharactersDropped", desk, "code", "ab\x01cd\x7f", []string{"abcd"}},
		{"OKFoldsCase", desk, "code", "Hello WORLD", []string{"hello", "world"}},
		{"OKFoldsNonASCII", desk, "code", "ÉCOLE Straße ÜBER ΣΟΦΙΑ", []string{"straße", "école", "über", "σοφια"}},
		{"OKNonASCIIPunctuationIsPartOfAWord", desk, "code", "a—b «c»", []string{"a—b", "«c»"}},
		{"OKEmpty", desk, "code", "", nil},
		{"OKOnlySeparators", desk, "code", " ,.- ", nil},
		{"OKDefaultStopwords", desk, "code", "The cat is on the mat", []string{"cat", "mat"}},
		{"OKStopwordsAfterFolding", desk, "code", "THE With", nil},
		{"OKNoStopwords", noStop, "t", "the cat", []string{"cat", "the"}},
		{"OKCustomStopwordsFolded", custom, "t", "foo BAR the", []string{"the"}},
		{"OKStems", desk, "notes", "running cats", []string{stem("cat"), stem("run"), "cats", "running"}},
		{"OKStemAndWordShareNothing", desk, "notes", "run running", []string{stem("run"), "run", "running"}},
		{"OKNoStemWhenUnchanged", desk, "notes", "hello", []string{"hello"}},
		{"OKNoStemUnderFourBytes", desk, "notes", "ran dye", []string{"dye", "ran"}},
		{"OKStemsFourBytes", desk, "notes", "runs", []string{stem("run"), "runs"}},
		{"OKStemsNonASCII", desk, "notes", "naïve", []string{stem("naïv"), "naïve"}},
		{"OKNoEmptyStem", desk, "notes", `\ \ \ \ `, []string{"    "}},
		{"OKNoStemField", desk, "code", "running cats", []string{"cats", "running"}},
		{"OKStopwordsAreNotStemmed", desk, "notes", "there", nil},
		{"OKNotText", desk, "customerTier", "gold", nil},
		{"OKNotInSchema", desk, "nope", "gold", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := tt.schema.Terms(tt.field, tt.value), tt.want; !slices.Equal(got, want) {
				t.Fatalf("got %q, want %q", got, want)
			}
		})
	}
}

func TestExpand(t *testing.T) {
	for _, tt := range []struct {
		name, field, word string
		want              []string
	}{
		{"OKStemmed", "notes", "running", []string{"running", stem("run"), "run"}},
		{"OKStemIsTheWord", "notes", "run", []string{"run", stem("run")}},
		{"OKShortWordsToo", "notes", "ran", []string{"ran", stem("ran")}},
		{"OKNoStemField", "code", "running", []string{"running"}},
		{"OKAnyOtherField", "customerTier", "running", []string{"running"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := desk.Expand(tt.field, tt.word), tt.want; !slices.Equal(got, want) {
				t.Fatalf("got %q, want %q", got, want)
			}
		})
	}
}

func TestTags(t *testing.T) {
	semi := mustSchema([]search.Field{{Name: "t", Type: search.TypeTag}}, search.Options{Separator: ';'})
	cased := mustSchema([]search.Field{{Name: "t", Type: search.TypeTag}}, search.Options{CaseSensitive: true})
	for _, tt := range []struct {
		name   string
		schema *search.Schema
		field  string
		value  string
		want   []string
	}{
		{"OKOne", desk, "customerTier", "gold", []string{"gold"}},
		{"OKList", desk, "customerTier", "gold,silver", []string{"gold", "silver"}},
		{"OKTrimmed", desk, "customerTier", "  gold ,\tnew york\n", []string{"gold", "new york"}},
		{"OKInnerSpaceKept", desk, "customerTier", "new  york", []string{"new  york"}},
		{"OKFolded", desk, "customerTier", "Gold,ÉLITE", []string{"gold", "élite"}},
		{"OKRepeatsDropped", desk, "customerTier", "gold, Gold ,GOLD", []string{"gold"}},
		{"OKEmptyDropped", desk, "customerTier", ",, ,gold,", []string{"gold"}},
		{"OKEmpty", desk, "customerTier", "", nil},
		{"OKPunctuationKept", desk, "customerTier", "a-b:c;d", []string{"a-b:c;d"}},
		{"OKNoEscapesInValues", desk, "customerTier", `a\,b`, []string{`a\`, "b"}},
		{"OKSeparator", semi, "t", "a,b; c", []string{"a,b", "c"}},
		{"OKCaseSensitive", cased, "t", "Gold,gold", []string{"Gold", "gold"}},
		{"OKNotTag", desk, "notes", "gold", nil},
		{"OKNotInSchema", desk, "nope", "gold", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := tt.schema.Tags(tt.field, tt.value), tt.want; !slices.Equal(got, want) {
				t.Fatalf("got %q, want %q", got, want)
			}
		})
	}
}
