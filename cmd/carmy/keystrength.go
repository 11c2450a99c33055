package main

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// minKeyBits is the least entropy a cluster key must carry, by
// keyEntropy's estimate: a key is all that stands between whoever
// reaches the node-to-node endpoints (or, without node TLS, Raft) and the
// cluster's log.
const minKeyBits = 128

// minKeyDistinct is the fewest distinct characters a cluster key may
// have: a long run of few characters ("aaaa…", "abab…") passes a
// length-times-alphabet estimate but is among the first things guessed.
const minKeyDistinct = 8

// keyEntropy estimates the bits of a key simply: its length in
// characters times log2 of the size of the alphabet made of the character
// classes it uses (lowercase 26, uppercase 26, digits 10, other printable
// ASCII 33, anything else 128). It is an upper bound for a random key of
// those classes; for a key a person made up it overestimates, which
// checkClusterKey's other rules temper. A key made of hex digits alone
// counts an alphabet of at least 16, digits alone included: 32 random hex
// digits (16 random bytes) are all decimal once in about 3.4 million keys,
// and such a key is as random as any other of them. A random key of
// `carmy keygen` (44 characters of base64) is about 280 bits; 32 hex
// digits are 165, or 128 when none is a letter.
func keyEntropy(key string) (bits float64, alphabet int) {
	var lower, upper, digit, punct, other bool
	hexOnly := true
	for _, r := range key {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F') {
			hexOnly = false
		}
		switch {
		case r >= 'a' && r <= 'z':
			lower = true
		case r >= 'A' && r <= 'Z':
			upper = true
		case r >= '0' && r <= '9':
			digit = true
		case r >= 0x20 && r < 0x7f:
			punct = true
		default:
			other = true
		}
	}
	for _, c := range []struct {
		used bool
		size int
	}{{lower, 26}, {upper, 26}, {digit, 10}, {punct, 33}, {other, 128}} {
		if c.used {
			alphabet += c.size
		}
	}
	if alphabet == 0 {
		return 0, 0
	}
	if hexOnly && alphabet < 16 {
		alphabet = 16
	}
	return float64(utf8.RuneCountInString(key)) * math.Log2(float64(alphabet)), alphabet
}

// checkClusterKey refuses a cluster key that is guessable by a simple
// estimate: under minKeyBits by keyEntropy, fewer than minKeyDistinct
// distinct characters, a shorter string repeated ("abcdefgh" four
// times), or mostly runs of one character (fewer runs than half its
// length: "aaaaabbbbbccccc…"). Every key `carmy keygen` or a node
// generates passes, as do 32 random hex digits.
func checkClusterKey(key string) error {
	const how = "carmy keygen makes one; or give none, and the node generates one in its data dir"
	bits, alphabet := keyEntropy(key)
	if bits < minKeyBits {
		return fmt.Errorf("the cluster key carries about %.0f bits of entropy by a simple estimate (%d characters from an alphabet of %d), want at least %d (%s)",
			bits, utf8.RuneCountInString(key), alphabet, minKeyBits, how)
	}
	distinct := map[rune]bool{}
	for _, r := range key {
		distinct[r] = true
	}
	if len(distinct) < minKeyDistinct {
		return fmt.Errorf("the cluster key uses %d distinct characters, want at least %d (%s)", len(distinct), minKeyDistinct, how)
	}
	if p := period(key); p < len(key) {
		return fmt.Errorf("the cluster key repeats a string of %d bytes (%s)", p, how)
	}
	if n := runs(key); 2*n < utf8.RuneCountInString(key) {
		return fmt.Errorf("the cluster key is mostly runs of one character (%d runs in %d characters) (%s)", n, utf8.RuneCountInString(key), how)
	}
	return nil
}

// runs counts the maximal runs of one character in s ("aabccc" has 3).
func runs(s string) int {
	n, prev := 0, rune(-1)
	for _, r := range s {
		if r != prev {
			n++
		}
		prev = r
	}
	return n
}

// period returns the length of the shortest string whose repetition is s
// (len(s) when there is none).
func period(s string) int {
	for p := 1; p <= len(s)/2; p++ {
		if len(s)%p == 0 && strings.Repeat(s[:p], len(s)/p) == s {
			return p
		}
	}
	return len(s)
}
