package partmap

// Search indexes (issue 36): declared by field and type, created and
// dropped while the server runs, queried in the Redis Query Engine's
// syntax. The meaning of a schema and a query is internal/search's; these
// are the types every door and store share.

// Field types of a search index, as FT.CREATE spells them.
const (
	IndexText    = "TEXT"
	IndexTag     = "TAG"
	IndexNumeric = "NUMERIC"
)

// IndexField declares one indexed profile field.
type IndexField struct {
	Name string `json:"name"`
	Type string `json:"type"` // IndexText, IndexTag or IndexNumeric
	// Sortable makes SORTBY on the field cheap: the index keeps the
	// field's sort key beside its entries.
	Sortable bool `json:"sortable,omitempty"`
	// NoStem (TEXT only) indexes words as they are, without their stems.
	NoStem bool `json:"noStem,omitempty"`
	// Separator (TAG only) splits a value into tags: one printable ASCII
	// character, "" for ",". Whole (TAG only) keeps the value as one tag,
	// never split, as the equality indexes of old directories do.
	Separator string `json:"separator,omitempty"`
	Whole     bool   `json:"whole,omitempty"`
	// CaseSensitive (TAG only) keeps the case of tags.
	CaseSensitive bool `json:"caseSensitive,omitempty"`
}

// IndexDefinition is a search index: FT.CREATE's name and schema.
type IndexDefinition struct {
	Name   string       `json:"name"`
	Fields []IndexField `json:"fields"`
	// Stopwords are the words TEXT fields leave out: nil is Redis's
	// default list, an empty list none (STOPWORDS 0).
	Stopwords []string `json:"stopwords"`
}

// IndexInfo describes an index as FT.INFO does.
type IndexInfo struct {
	IndexDefinition
	// Docs is the number of profiles the index holds: every profile of the
	// directory, as an index ON HASH of every key would (num_docs).
	Docs int64 `json:"numDocs"`
	// Building is true until the background build has indexed every
	// profile that existed when the index was created; queries are
	// refused (EUNAVAILABLE) until then. Progress is the share of
	// partitions built, 0 to 1.
	Building bool    `json:"building"`
	Progress float64 `json:"progress"`
	// Legacy marks the index of the fields a directory was created with
	// (serve --index): always there, TAG fields that hold whole values,
	// and it cannot be dropped.
	Legacy bool `json:"legacy,omitempty"`
}

// LegacyIndexName names the index of a directory's equality-indexed
// fields (serve --index) in the query language.
const LegacyIndexName = "profiles"

// MaxSearchIndexes bounds the search indexes of one directory: each costs
// every write its entries.
const MaxSearchIndexes = 16

// SearchOptions are FT.SEARCH's options.
type SearchOptions struct {
	Query string
	// SortBy orders the results by a SORTABLE field of the index,
	// ascending unless Descending; profiles without the field come last.
	// Without it results come in enumeration order: by partition, then by
	// canonical email (partmap computes no relevance score).
	SortBy     string
	Descending bool
	// Offset and Limit are LIMIT offset count; Limit 0 is
	// DefaultSearchLimit, and a negative Limit returns no profiles (only
	// Total), as LIMIT 0 0 does.
	Offset int
	Limit  int
	// Return, when not nil, names the only fields returned (RETURN), in
	// order; a missing field is left out.
	Return []string
	// NoContent returns emails without fields.
	NoContent bool
	// Cursor continues a search where a page ended (HTTP paging); it is
	// bound to the query and its order, and replaces Offset.
	Cursor string
}

// Search page sizes.
const (
	DefaultSearchLimit = 10
	MaxSearchLimit     = 10000
)

// SearchHit is one profile a search found.
type SearchHit struct {
	Email string `json:"email"`
	// Fields are the profile's fields (RETURN's only, in its order),
	// nil with NoContent.
	Fields []FieldValue `json:"fields,omitempty"`
}

// FieldValue is one field of a hit.
type FieldValue struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// SearchResult is one page of a search.
type SearchResult struct {
	// Total counts every profile the query matches, on every page.
	Total int64       `json:"total"`
	Hits  []SearchHit `json:"hits"`
	// NextCursor continues after the last hit; "" on the last page.
	NextCursor string `json:"nextCursor,omitempty"`
}
