package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
)

// A Chainer makes the entries of a chain with their lines, as Head.Next
// and Entry.Line do, but encodes each entry once and keeps its hash
// state: a node's ledger writer chains thousands of entries a second.
// It is not safe for concurrent use; its zero value is ready to use.
type Chainer struct {
	h    hash.Hash
	sum  [sha256.Size]byte
	prev [2 * sha256.Size]byte // room for a PrevHash's bytes
}

// hash returns the hash of an entry whose PrevHash is prev and whose
// canonical JSON is canonical: the hex SHA-256 of the two, in that order
// (Entry.ComputeHash).
func (c *Chainer) hash(prev string, canonical []byte) (digits [2 * sha256.Size]byte) {
	if c.h == nil {
		c.h = sha256.New()
	}
	c.h.Reset()
	_, _ = c.h.Write(append(c.prev[:0], prev...))
	_, _ = c.h.Write(canonical)
	hex.Encode(digits[:], c.h.Sum(c.sum[:0]))
	return digits
}

// hashMember is the length of `,"hash":"<64 hex digits>"`.
const hashMember = len(`,"hash":""`) + 2*sha256.Size

// AppendNext makes the entry that follows head from d, as head.Next(d)
// does, and appends its Line to dst. It returns the extended dst, the
// entry and the new head.
func (c *Chainer) AppendNext(dst []byte, head Head, d Draft) ([]byte, Entry, Head) {
	e := Clean(d)
	e.Seq = head.Seq + 1
	e.PrevHash = head.Hash
	start := len(dst)
	dst, at := e.appendJSON(dst, false)
	digits := c.hash(e.PrevHash, dst[start:])
	e.Hash = string(digits[:])
	// The canonical JSON with the hash member put in its place: hex
	// digits need no escaping.
	end := len(dst)
	dst = append(dst, make([]byte, hashMember)...)
	copy(dst[at+hashMember:], dst[at:end])
	n := at + copy(dst[at:], `,"hash":"`)
	n += copy(dst[n:], digits[:])
	dst[n] = '"'
	return append(dst, '\n'), e, Head{Seq: e.Seq, Hash: e.Hash}
}
