package search

import (
	"testing"

	"github.com/kljensen/snowball/english"
	"pgregory.net/rapid"
)

// TestKeepsFormAgreesWithStemmer: whatever keepsForm spares the stemmer
// of, the stemmer leaves as it is. The words are drawn from letters,
// digits, apostrophes and spaces, to reach its clean-up as well as its
// rules.
func TestKeepsFormAgreesWithStemmer(t *testing.T) {
	alphabet := []rune("abcdeilnorsuyéü0129' \u2018\u2019\u201b")
	rapid.Check(t, func(t *rapid.T) {
		base := rapid.SliceOfN(rapid.SampledFrom(alphabet), 0, 14).Draw(t, "word")
		// Half end in a digit: those are the words keepsForm can spare.
		if rapid.Bool().Draw(t, "digit") {
			base = append(base, rapid.RuneFrom([]rune("0123456789")).Draw(t, "last"))
		}
		word := string(base)
		if keepsForm(word) && english.Stem(word, true) != word {
			t.Fatalf("keepsForm(%q), but the stemmer makes %q", word, english.Stem(word, true))
		}
	})
	for _, word := range []string{"liddell123", "running1", "sky7", "yell2", "ies4"} {
		if !keepsForm(word) {
			t.Errorf("keepsForm(%q) = false", word)
		}
	}
	for _, word := range []string{"'s1", "a\u2019s1", " x1", "running", ""} {
		if keepsForm(word) {
			t.Errorf("keepsForm(%q) = true", word)
		}
	}
}
