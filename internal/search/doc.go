// Package search is the meaning of partmap's profile search (issue 36), as
// a support desk would use it: index schemas of TEXT, TAG and NUMERIC
// fields, how each indexes a profile's value, RediSearch's query syntax
// parsed to a small tree (Node), the reference evaluation of a query on
// one profile (Match), and the order of results. It knows nothing of
// storage: a store builds its indexes from Terms, Tags and ParseNumber
// (EncodeNumber for keys), plans scans from a Node, and is checked
// against Match.
//
// The meaning is Redis's (the Redis Query Engine, RediSearch 2.x, DIALECT
// 2) for hashes: a TEXT value is split on white space and punctuation, a
// backslash keeps a separator in its word, words are folded to lower
// case, stop words are dropped and each word of 4 bytes or more is also
// indexed by its Snowball English stem; a TAG value is a separated list of
// trimmed, folded tags; a NUMERIC value is a number as strtod reads it.
// Query words are read the same way, so that a query meets what was
// indexed.
//
// # Caveats
//
// Where partmap differs from Redis, on purpose:
//
//   - All white space separates words, newlines and non-breaking spaces
//     included. Redis separates on space and tab only, and drops other
//     control characters, so that "a\nb" is the one word "ab" there.
//   - A backslash escapes whatever follows it, in values and in queries
//     alike. Redis's document tokenizer keeps "a\\,b" as one word where its
//     query parser reads two.
//   - A word of digits in a query is a word like any other: "3.14" is 3 and
//     14, as in indexed text, where Redis looks up the term "3.14", which
//     no text tokenised by Redis can hold. "-5" is NOT 5, where Redis reads
//     the number -5.
//   - Stems are marked with StemPrefix, a control character, not Redis's
//     "+", so a query for the escaped word "\+run" finds only that word.
//   - A prefix shorter than MinPrefix characters is an error, where Redis
//     quietly matches nothing.
//   - A query whose words are all stop words is an error; Redis returns no
//     results.
//   - A NUMERIC value that is no number leaves the profile out of that
//     field's index only. Redis fails to index the whole hash.
//   - Hexadecimal numbers ("0x10") are not numbers, as in Redis 8's parser.
//   - Stemming is github.com/kljensen/snowball's English (Porter2), a Go
//     port of the Snowball stemmer Redis links; its stems may differ from
//     libstemmer's on rare words.
//   - Results without SORTBY come in a store's enumeration order (by
//     partition, then email), not by relevance: partmap computes no
//     scores. Schema.Order with no field sorts by email alone, for
//     callers that hold no partitions.
//
// Not supported, and refused with an error that says so: exact phrases
// ("a b"), optional terms (~), fuzzy terms (%), suffix and infix queries
// (*ab, *ab*), tag prefixes (@f:{ab*}), parameters ($p), attributes
// (=>{...}), numeric comparisons (@f>5), field lists (@a|b:word), GEO and
// vector fields, and INDEXEMPTY / INDEXMISSING.
package search
