package partmap

import (
	"fmt"
	"strconv"
)

// DefaultPartitions is the partition count of the original design. It is
// persisted with the data: changing it moves most keys to other partitions.
const DefaultPartitions = 1000

// MaxEmailBytes bounds a canonical email. It is a storage-key limit that the
// original design does not have; real addresses are at most 254 bytes.
const MaxEmailBytes = 320

// FNV-1a, 32 bits. Written out rather than taken from hash/fnv so that the
// compatibility contract is visible in one place and costs no allocation.
const (
	fnvOffset32 = 2166136261
	fnvPrime32  = 16777619
)

// Partition numbers one instance of the partitioned attribute map.
type Partition uint32

// String names the partition as the original engine does: partition-000 to
// partition-999. Counts above 1000 simply widen the number. It is in every
// key of the Redis store, so it does without fmt.
func (p Partition) String() string {
	if p >= 1000 {
		return "partition-" + strconv.FormatUint(uint64(p), 10)
	}
	return string([]byte{'p', 'a', 'r', 't', 'i', 't', 'i', 'o', 'n', '-', byte('0' + p/100), byte('0' + p/10%10), byte('0' + p%10)})
}

// Hash is 32-bit FNV-1a over the bytes of s, with wrapping arithmetic.
func Hash(s string) uint32 {
	h := uint32(fnvOffset32)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= fnvPrime32
	}
	return h
}

// CanonicalEmail trims leading and trailing ASCII whitespace and lowercases
// A-Z, exactly as every client of the original engine does. The input must be
// ASCII and non-empty after trimming; anything else is an EINVALIDEMAIL error.
// Nothing else about the address is checked, so that partmap accepts (and
// places) every key the original accepts.
func CanonicalEmail(email string) (string, error) {
	for i := 0; i < len(email); i++ {
		if email[i] >= 0x80 {
			return "", Errorf(EINVALIDEMAIL, "email address must be ASCII; found byte 0x%02X at offset %d", email[i], i)
		}
	}
	start, end := 0, len(email)
	for start < end && isASCIISpace(email[start]) {
		start++
	}
	for end > start && isASCIISpace(email[end-1]) {
		end--
	}
	if start == end {
		return "", Errorf(EINVALIDEMAIL, "email address is empty")
	}
	if end-start > MaxEmailBytes {
		return "", &Error{Code: ETOOLARGE, Field: FieldEmail, Limit: "email", LimitBytes: MaxEmailBytes,
			Message: fmt.Sprintf("email address is %d bytes; the limit is %d", end-start, MaxEmailBytes)}
	}
	trimmed := email[start:end]
	for i := 0; i < len(trimmed); i++ {
		if 'A' <= trimmed[i] && trimmed[i] <= 'Z' {
			return lowerASCII(trimmed), nil
		}
	}
	return trimmed, nil // already canonical: no allocation
}

func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}

func isASCIISpace(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\v', '\f', '\r':
		return true
	}
	return false
}

// PartitionOf returns the partition of a canonical email among n partitions.
func PartitionOf(canonical string, n int) Partition {
	return Partition(Hash(canonical) % uint32(n))
}

// Locate canonicalises email and places it among n partitions.
func Locate(email string, n int) (canonical string, p Partition, err error) {
	canonical, err = CanonicalEmail(email)
	if err != nil {
		return "", 0, err
	}
	return canonical, PartitionOf(canonical, n), nil
}
