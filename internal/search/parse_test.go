package search_test

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/search"
)

// Each OK case gives the canonical form of the query's tree, which must
// parse to the same tree.
func TestParse(t *testing.T) {
	for _, tt := range []struct {
		name, query, want string
	}{
		{"OKWord", "hello", "hello"},
		{"OKWordFolded", "HeLLo", "hello"},
		{"OKWordNonASCII", "ÉCOLE", "école"},
		{"OKWordNotStemmed", "running", "running"},
		{"OKAnd", "hello world", "hello world"},
		{"OKAndFlat", "a1 (b1 c1) d1", "a1 b1 c1 d1"},
		{"OKOr", "hello|world", "hello | world"},
		{"OKOrFlat", "a1 | (b1 | c1) | d1", "a1 | b1 | c1 | d1"},
		{"OKAndBindsTighter", "a1 b1 | c1 d1", "a1 b1 | c1 d1"},
		{"OKOrInAnd", "a1 (b1 | c1)", "a1 (b1 | c1)"},
		{"OKNot", "-hello", "-hello"},
		{"OKNotBindsTighterThanAnd", "-a1 b1", "-a1 b1"},
		{"OKNotOfGroup", "-(a1 b1)", "-(a1 b1)"},
		{"OKNotOfOr", "-(a1 | b1)", "-(a1 | b1)"},
		{"OKDoubleNegation", "--hello", "hello"},
		{"OKSpaceAfterMinus", "- hello", "-hello"},
		{"OKHyphenIsNegation", "foo-bar", "foo -bar"},
		{"OKEscapedHyphen", `foo\-bar`, `foo\-bar`},
		{"OKEscapedSpace", `new\ york`, `new\ york`},
		{"OKEscapedBackslash", `a\\b`, `a\\b`},
		{"OKSilentPunctuation", "john.smith, acme/inc", "john smith acme inc"},
		{"OKDigits", "3.14", "3 14"},
		{"OKPrefix", "hel*", "hel*"},
		{"OKPrefixFolded", "HEL*", "hel*"},
		{"OKPrefixTwoCharacters", "ab*", "ab*"},
		{"OKPrefixOfStopword", "the*", "the*"},
		{"OKPrefixNonASCII", "éc*", "éc*"},
		{"OKPrefixThenWord", "ab*cd", "ab* cd"},
		{"OKStopwordDropped", "the cat", "cat"},
		{"OKStopwordInOr", "the | cat", "cat"},
		{"OKStopwordNegated", "cat -the", "cat"},
		{"OKStopwordEscaped", `th\e cat`, "cat"},
		{"OKAll", "*", "*"},
		{"OKAllSpaced", "  *  ", "*"},
		{"OKAllInParentheses", "( ( * ) )", "*"},
		{"OKField", "@notes:hello", "@notes:hello"},
		{"OKFieldSpaces", "@notes : hello", "@notes:hello"},
		{"OKFieldAppliesToNextOnly", "@notes:hello world", "@notes:hello world"},
		{"OKFieldThenOr", "@notes:hello|world", "@notes:hello | world"},
		{"OKFieldGroup", "@notes:(hello world)", "@notes:hello @notes:world"},
		{"OKFieldGroupOr", "@notes:(hello|world)", "@notes:hello | @notes:world"},
		{"OKFieldGroupNested", "@notes:(a1 (b1 | -c1*))", "@notes:a1 (@notes:b1 | -@notes:c1*)"},
		{"OKFieldNegated", "-@notes:hello", "-@notes:hello"},
		{"OKFieldNegatesWord", "@notes:-hello", "-@notes:hello"},
		{"OKFieldPrefix", "@notes:hel*", "@notes:hel*"},
		{"OKFieldEscapedName", `@first\ name:ann`, `@first\ name:ann`},
		{"OKFieldControlCharacterName", "@a\x01b:ann", "@a\x01b:ann"},
		{"OKFieldStopword", "@notes:the cat", "cat"},
		{"OKTag", "@customerTier:{gold}", "@customerTier:{gold}"},
		{"OKTagFolded", "@customerTier:{GOLD}", "@customerTier:{gold}"},
		{"OKTagAny", "@customerTier:{ gold | silver }", "@customerTier:{gold|silver}"},
		{"OKTagRepeatsDropped", "@customerTier:{gold|GOLD}", "@customerTier:{gold}"},
		{"OKTagEscapedSpace", `@customerTier:{hello\ world}`, `@customerTier:{hello\ world}`},
		{"OKTagWordsJoined", "@customerTier:{ hello   world }", `@customerTier:{hello\ world}`},
		{"OKTagEscapedPunctuation", `@customerTier:{a\-b\:c\|d\}}`, `@customerTier:{a\-b\:c\|d\}}`},
		{"OKTagStopword", "@customerTier:{the}", "@customerTier:{the}"},
		{"OKTagNegated", "-@customerTier:{gold}", "-@customerTier:{gold}"},
		{"OKRange", "@orders:[1 5]", "@orders:[1 5]"},
		{"OKRangeExclusive", "@orders:[(1 (5]", "@orders:[(1 (5]"},
		{"OKRangeInfinite", "@orders:[-inf inf]", "@orders:[-inf +inf]"},
		{"OKRangeInfinitePlus", "@orders:[(-inf +inf]", "@orders:[(-inf +inf]"},
		{"OKRangeDecimals", "@orders:[-1.5 2.5e3]", "@orders:[-1.5 2500]"},
		{"OKRangeExponent", "@orders:[1e21 1e22]", "@orders:[1e+21 1e+22]"},
		{"OKRangeNegativeZero", "@orders:[-0 0]", "@orders:[0 0]"},
		{"OKRangeOne", "@orders:[ 5 ]", "@orders:[5 5]"},
		{"OKRangeEmpty", "@orders:[(5 5]", "@orders:[(5 5]"},
		{"OKMixed", "@customerTier:{gold} @orders:[10 +inf] -refund* | vip", "@customerTier:{gold} @orders:[10 +inf] -refund* | vip"},
		{"OKControlCharacterWord", "cat \x01", "cat"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n, err := search.Parse(desk, tt.query)
			if err != nil {
				t.Fatalf("got %v", err)
			}
			if got, want := n.String(), tt.want; got != want {
				t.Fatalf("got %s, want %s", got, want)
			}
			again, err := search.Parse(desk, n.String())
			if err != nil || !reflect.DeepEqual(again, n) {
				t.Fatalf("canonical %s parses to %#v, %v; want %#v", n, again, err, n)
			}
		})
	}
}

// The tree itself, for a planner: node kinds, fields and normal forms.
func TestParseTree(t *testing.T) {
	n, err := search.Parse(desk, `@customerTier:{Gold|new\ york} -@orders:[(1 +inf] (Hel* | @notes:Runs) world`)
	if err != nil {
		t.Fatal(err)
	}
	want := search.And{Nodes: []search.Node{
		search.Tag{Field: "customerTier", Values: []string{"gold", "new york"}},
		search.Not{Node: search.Range{Field: "orders", Min: 1, Max: math.Inf(1), MinExclusive: true}},
		search.Or{Nodes: []search.Node{
			search.Prefix{Prefix: "hel"},
			search.Term{Field: "notes", Word: "runs"},
		}},
		search.Term{Word: "world"},
	}}
	if got := n; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
}

func TestParseErrors(t *testing.T) {
	long := strings.Repeat("a ", search.MaxQueryBytes/2) + "a"
	deep := strings.Repeat("(", search.MaxDepth+1) + "a" + strings.Repeat(")", search.MaxDepth+1)
	for _, tt := range []struct {
		name, query, want string
	}{
		{"ErrEmpty", "", "query is empty"},
		{"ErrBlank", " \t\n", "query is empty"},
		{"ErrTooLong", long, "query is 4097 bytes; the limit is 4096"},
		{"ErrInvalidUTF8", "ab\xffcd", "not valid UTF-8 at offset 2"},
		{"ErrOnlyStopwords", "the a", "nothing to search for"},
		{"ErrOnlyStopwordsNegated", "-the", "nothing to search for"},
		{"ErrUnclosedGroup", "(a1 b1", "Syntax error at offset 6 near end of query: the ( at offset 0 is not closed"},
		{"ErrUnopenedGroup", "a1 b1)", "Syntax error at offset 5 near ): this ) closes nothing"},
		{"ErrEmptyGroup", "a1 ()", "Syntax error at offset 4 near ): an expression is missing"},
		{"ErrOrWithoutLeft", "| a1", "Syntax error at offset 0 near |: an expression is missing"},
		{"ErrOrWithoutRight", "a1 |", "Syntax error at offset 4 near end of query: an expression is missing"},
		{"ErrDoubleOr", "a1 || b1", "Syntax error at offset 4 near |"},
		{"ErrMinusAlone", "a1 -", "Syntax error at offset 4 near end of query: - must come before"},
		{"ErrMinusBeforeOr", "a1 - | b1", "Syntax error at offset 5 near |"},
		{"ErrTooDeep", deep, "Parser stack overflow at offset 100: at most 100"},
		{"ErrTooManyNegations", strings.Repeat("-", search.MaxDepth+1) + "a", "Parser stack overflow at offset 100"},
		{"ErrPrefixTooShort", "a*", "Prefix too short at offset 0 near a*"},
		{"ErrPrefixTooShortAfterFolding", `x \1*`, "Prefix too short at offset 2 near \\1*"},
		{"ErrPrefixAlone", "a1 *", "Syntax error at offset 3 near *: * matches every profile only as the whole query"},
		{"ErrStarAndMore", "* a1", "Syntax error at offset 0 near *"},
		{"ErrNotStar", "-*", "Syntax error at offset 1 near *"},
		{"ErrSuffix", "*ing", "Syntax error at offset 0 near *: suffix and infix queries"},
		{"ErrPhrase", `"hello world"`, `Syntax error at offset 0 near ": exact phrases are not supported`},
		{"ErrOptional", "~hello", "Syntax error at offset 0 near ~: optional terms"},
		{"ErrFuzzy", "%helo%", "Syntax error at offset 0 near %: fuzzy matching"},
		{"ErrParameter", "$name", "Syntax error at offset 0 near $: query parameters"},
		{"ErrColon", "a1:b1", "Syntax error at offset 2 near :"},
		{"ErrBraceWithoutField", "{gold}", "Syntax error at offset 0 near {: a tag list or a range needs a field"},
		{"ErrBracketWithoutField", "a1 [1 2]", "Syntax error at offset 3 near [: a tag list or a range needs a field"},
		{"ErrComparison", "@orders>5", "Syntax error at offset 7 near >: a : must follow @orders"},
		{"ErrAtAlone", "@ a1", "Syntax error at offset 0 near @: @ must start a field name"},
		{"ErrUnknownField", "a1 @nope:x", "Unknown field at offset 3 near nope"},
		{"ErrUnknownFieldCase", "@Notes:x", "Unknown field at offset 0 near Notes"},
		{"ErrUnknownFieldInEmail", "ann@example.com", "Unknown field at offset 3 near example"},
		{"ErrFieldWithoutColon", "@notes hello", "Syntax error at offset 7 near hello: a : must follow @notes"},
		{"ErrFieldWithoutWord", "@notes:", "Syntax error at offset 7 near end of query: a word, a prefix or a ( must follow @notes:"},
		{"ErrFieldInFieldGroup", "@notes:(a1 @code:b1)", "Syntax error at offset 11 near @: a field cannot be named inside @notes:( )"},
		{"ErrTextOperatorOnTag", "@customerTier:gold", "Expected a TEXT field at offset 0 near customerTier: customerTier is a TAG field"},
		{"ErrTextOperatorOnNumeric", "@orders:(5)", "Expected a TEXT field at offset 0 near orders: orders is a NUMERIC field"},
		{"ErrTagOnText", "@notes:{gold}", "Expected a TAG field at offset 0 near notes: notes is a TEXT field"},
		{"ErrTagOnNumeric", "x1 @orders:{5}", "Expected a TAG field at offset 3 near orders"},
		{"ErrRangeOnTag", "@customerTier:[1 2]", "Expected a NUMERIC field at offset 0 near customerTier"},
		{"ErrRangeOnText", "@notes:[1 2]", "Expected a NUMERIC field at offset 0 near notes"},
		{"ErrTagEmpty", "@customerTier:{}", "Syntax error at offset 15 near }: a tag is empty"},
		{"ErrTagEmptyAlternative", "@customerTier:{gold| }", "Syntax error at offset 21 near }: a tag is empty"},
		{"ErrTagUnclosed", "@customerTier:{gold", "Syntax error at offset 19 near end of query: the { at offset 14 is not closed"},
		{"ErrTagPunctuation", "@customerTier:{a-b}", "Syntax error at offset 16 near -: escape punctuation in a tag with a backslash"},
		{"ErrTagPrefix", "@customerTier:{go*}", "Syntax error at offset 17 near *: prefix matching of tags is not supported"},
		{"ErrRangeBackwards", "@orders:[5 1]", "Invalid numeric range (min > max) at offset 8: @orders:[5 1]"},
		{"ErrRangeBackwardsInfinite", "@orders:[+inf -inf]", "Invalid numeric range (min > max) at offset 8"},
		{"ErrRangeNotANumber", "@orders:[1 ten]", "Syntax error at offset 11 near ten: a range bound must be a number"},
		{"ErrRangeNaN", "@orders:[nan 1]", "Syntax error at offset 9 near nan"},
		{"ErrRangeOverflow", "@orders:[1 1e999]", "Syntax error at offset 11 near 1e999"},
		{"ErrRangeHex", "@orders:[0x1 2]", "Syntax error at offset 9 near 0x1"},
		{"ErrRangeEmpty", "@orders:[]", "Syntax error at offset 9 near ]: a range bound must be a number"},
		{"ErrRangeThreeBounds", "@orders:[1 2 3]", "Syntax error at offset 13 near 3: the [ at offset 8 is not closed"},
		{"ErrRangeUnclosed", "@orders:[1 2", "Syntax error at offset 12 near end of query: the [ at offset 8 is not closed"},
		{"ErrRangeOneExcluded", "@orders:[(1]", "Syntax error at offset 11 near ]: a range of one number cannot exclude it"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n, err := search.Parse(desk, tt.query)
			var e *partmap.Error
			if !errors.As(err, &e) || e.Code != partmap.EINVALID || !strings.Contains(e.Message, tt.want) {
				t.Fatalf("got %v, %v; want EINVALID saying %q", n, err, tt.want)
			}
		})
	}
}

// A schema without TEXT fields takes words, which match nothing, as in
// Redis.
func TestParseWithoutTextFields(t *testing.T) {
	tags := mustSchema([]search.Field{{Name: "t", Type: search.TypeTag}}, search.Options{})
	n, err := search.Parse(tags, "gold")
	if err != nil {
		t.Fatal(err)
	}
	if search.Match(tags, n, map[string]string{"t": "gold"}) {
		t.Fatal("a word matched a TAG field")
	}
}

// A custom stop-word list replaces the default in queries too.
func TestParseStopwords(t *testing.T) {
	s := mustSchema([]search.Field{{Name: "t"}}, search.Options{Stopwords: []string{"Foo"}})
	n, err := search.Parse(s, "the FOO")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := n.String(), "the"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}
