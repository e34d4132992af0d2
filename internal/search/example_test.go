package search_test

import (
	"fmt"

	"github.com/partmap/partmap/internal/search"
)

func ExampleParse() {
	schema, err := search.NewSchema([]search.Field{
		{Name: "notes"},
		{Name: "customerTier", Type: search.TypeTag},
		{Name: "orders", Type: search.TypeNumeric, Sortable: true},
	}, search.Options{})
	if err != nil {
		panic(err)
	}
	q, err := search.Parse(schema, "@customerTier:{Gold | Silver} @orders:[(10 +inf] refund* -@notes:closed")
	if err != nil {
		panic(err)
	}
	fmt.Println(q)
	fmt.Println(search.Match(schema, q, map[string]string{
		"notes":        "Asked for refunds twice",
		"customerTier": "gold, early adopter",
		"orders":       "12",
	}))

	_, err = search.Parse(schema, "@tier:{gold}")
	fmt.Println(err)
	// Output:
	// @customerTier:{gold|silver} @orders:[(10 +inf] refund* -@notes:closed
	// true
	// invalid: Unknown field at offset 0 near tier
}
