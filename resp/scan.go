package resp

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"

	"github.com/partmap/partmap"
)

// SCAN and PARTMAP.SEARCH, which page through the profiles.

// scanCursors maps the numbers SCAN hands out, as Redis clients expect a
// cursor to be, to the directory's own cursors, which hold a partition and
// an email. Any connection may continue any cursor, since a client's pool
// sends each page on whichever connection is free. But each cursor
// belongs to the connection it was handed to, and a connection keeps only
// its newest maxScanCursors: one that starts more scans forgets its own
// oldest, never another connection's. A connection that closes leaves its
// cursors to the newest maxOrphanScanCursors of all closed connections',
// so that a scan whose connection dropped goes on over another. A cursor
// forgotten is refused, and the client starts again from 0.
type scanCursors struct {
	mu      sync.Mutex
	byID    map[uint64]string
	orphans []uint64 // closed connections' cursors, oldest first
}

const (
	maxScanCursors       = 1000
	maxOrphanScanCursors = 10_000
)

func (sc *scanCursors) put(c *client, cursor string) uint64 {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.byID == nil {
		sc.byID = map[uint64]string{}
	}
	id := rand.Uint64() | 1 // never 0, which starts and ends a scan
	for sc.byID[id] != "" {
		id = rand.Uint64() | 1
	}
	sc.byID[id] = cursor
	c.cursors = append(c.cursors, id)
	if len(c.cursors) > maxScanCursors {
		delete(sc.byID, c.cursors[0])
		c.cursors = c.cursors[1:]
	}
	return id
}

func (sc *scanCursors) get(id uint64) (string, bool) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	c, ok := sc.byID[id]
	return c, ok
}

// release hands the cursors of c, which has hung up, to the orphans.
func (sc *scanCursors) release(c *client) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.orphans = append(sc.orphans, c.cursors...)
	c.cursors = nil
	if n := len(sc.orphans) - maxOrphanScanCursors; n > 0 {
		for _, id := range sc.orphans[:n] {
			delete(sc.byID, id)
		}
		sc.orphans = slices.Clone(sc.orphans[n:])
	}
}

// scanOptions reads MATCH, COUNT and, where typed, TYPE from argument
// from on.
func scanOptions(args [][]byte, from int, typed bool) (match string, count int, kind string, err error) {
	count = 10
	for i := from; i < len(args); i += 2 {
		opt := lower(args[i])
		if i+1 >= len(args) || !(opt == "match" || opt == "count" || (typed && opt == "type")) {
			return "", 0, "", refusal(errSyntax)
		}
		v := string(args[i+1])
		switch opt {
		case "match":
			match = v
		case "count":
			n, ok := partmap.ParseInteger(v)
			if !ok {
				return "", 0, "", refusal(errNotInteger)
			}
			if n < 1 {
				return "", 0, "", refusal(errSyntax)
			}
			count = int(n)
		case "type":
			kind = lower(args[i+1])
		}
	}
	return match, count, kind, nil
}

// cmdScan pages through every profile's key: a profile that exists for
// the whole of a scan is returned exactly once, across resizes too, as
// the directory's listing guarantees. COUNT is the page's size (at most
// the directory's largest page); MATCH filters each page.
func cmdScan(k *call) {
	id, ok := parseCursor(k.args[1])
	if !ok {
		k.w.WriteError(errInvalidCursor)
		return
	}
	match, count, kind, err := scanOptions(k.args, 2, true)
	if err != nil {
		k.w.fail(err)
		return
	}
	opts := partmap.ListOptions{Limit: min(count, partmap.MaxPageLimit)}
	if id != 0 {
		var ok bool
		if opts.Cursor, ok = k.s.cursors.get(id); !ok {
			k.w.WriteError("ERR invalid cursor: it is not one this server handed out, or too old; start again from 0")
			return
		}
	}
	var keys []string
	next := "0"
	if kind == "" || kind == "hash" { // every key is a profile's hash
		page, err := k.store.ListProfiles(k.ctx, opts)
		if err != nil {
			k.w.WriteError(storeError(err))
			return
		}
		for _, r := range page.Profiles {
			if e := r.Profile.Email(); isKey(&r) && (match == "" || globMatch(match, e)) {
				keys = append(keys, e)
			}
		}
		if page.NextCursor != "" {
			next = strconv.FormatUint(k.s.cursors.put(k.c, page.NextCursor), 10)
		}
	}
	k.w.WriteArray(2)
	k.w.WriteBulkString(next)
	k.w.strings(keys)
}

// globMatch is Redis's glob (stringmatchlen): * any run, ? any byte,
// [abc], [^abc] and [a-z] sets, and \ to quote the next byte. It
// backtracks only to the last *, so a pattern of many stars costs
// O(len(pattern)·len(s)), not exponential time.
func globMatch(pattern, s string) bool {
	p, i := 0, 0
	star, mark := -1, 0 // the last * seen, and where s stood then
	for i < len(s) {
		if p < len(pattern) && pattern[p] == '*' {
			star, mark = p, i
			p++
			continue
		}
		if p < len(pattern) {
			if n, ok := matchOne(pattern[p:], s[i]); ok {
				p += n
				i++
				continue
			}
		}
		if star < 0 {
			return false
		}
		mark++
		p, i = star+1, mark
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// matchOne matches c against the token at the start of pattern, which is
// not a *, and says how long the token is.
func matchOne(pattern string, c byte) (int, bool) {
	switch pattern[0] {
	case '?':
		return 1, true
	case '\\':
		if len(pattern) >= 2 {
			return 2, pattern[1] == c
		}
		return 1, c == '\\'
	case '[':
		p := 1
		not := p < len(pattern) && pattern[p] == '^'
		if not {
			p++
		}
		matched := false
		for p < len(pattern) && pattern[p] != ']' {
			switch {
			case pattern[p] == '\\' && p+1 < len(pattern):
				matched = matched || pattern[p+1] == c
				p += 2
			case p+2 < len(pattern) && pattern[p+1] == '-':
				lo, hi := pattern[p], pattern[p+2]
				if lo > hi {
					lo, hi = hi, lo
				}
				matched = matched || (lo <= c && c <= hi)
				p += 3
			default:
				matched = matched || pattern[p] == c
				p++
			}
		}
		if p < len(pattern) {
			p++ // the ]
		}
		return p, matched != not
	}
	return 1, pattern[0] == c
}

// cmdSearch is partmap's own command, the HTTP API's search:
//
//	PARTMAP.SEARCH cursor field value [field value ...] [COUNT n]
//
// pages, as SCAN does, through the profiles whose fields hold exactly
// every value given (AND, on indexed fields), and answers the next cursor
// and the keys of the page.
func cmdSearch(k *call) {
	id, ok := parseCursor(k.args[1])
	if !ok {
		k.w.WriteError(errInvalidCursor)
		return
	}
	args := k.args[2:]
	count := 10
	if n := len(args); n >= 2 && lower(args[n-2]) == "count" && n%2 == 0 {
		c, ok := partmap.ParseInteger(string(args[n-1]))
		if !ok || c < 1 {
			k.w.WriteError(errNotInteger)
			return
		}
		count, args = int(c), args[:n-2]
	}
	if len(args) == 0 || len(args)%2 != 0 {
		k.w.WriteError(errSyntax)
		return
	}
	opts := partmap.ListOptions{Limit: min(count, partmap.MaxPageLimit)}
	for i := 0; i < len(args); i += 2 {
		opts.Where = append(opts.Where, partmap.Match{Field: string(args[i]), Value: string(args[i+1])})
	}
	if id != 0 {
		var ok bool
		if opts.Cursor, ok = k.s.cursors.get(id); !ok {
			k.w.WriteError("ERR invalid cursor: it is not one this server handed out, or too old; start again from 0")
			return
		}
	}
	page, err := k.store.ListProfiles(k.ctx, opts)
	if err != nil {
		k.w.WriteError(storeError(err))
		return
	}
	next := "0"
	if page.NextCursor != "" {
		next = strconv.FormatUint(k.s.cursors.put(k.c, page.NextCursor), 10)
	}
	keys := make([]string, len(page.Profiles))
	for i, r := range page.Profiles {
		keys[i] = r.Profile.Email()
	}
	k.w.WriteArray(2)
	k.w.WriteBulkString(next)
	k.w.strings(keys)
}
