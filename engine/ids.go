package engine

import (
	"crypto/rand"
	"encoding/binary"
	"time"
)

// crockford is Crockford's base32 alphabet: no I, L, O or U.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// NewExecutionID returns "exec_" followed by 36 base32 characters: a 48-bit
// millisecond timestamp (so ids sort roughly by start) and 128 random bits
// (so they are unique cluster-wide without coordination).
func NewExecutionID(now time.Time) string {
	var raw [22]byte // 6 bytes of time, 16 random, padded to 22 for 176 bits
	binary.BigEndian.PutUint64(raw[0:8], uint64(now.UnixMilli())<<16)
	rand.Read(raw[6:22])
	out := make([]byte, 0, 5+36)
	out = append(out, "exec_"...)
	// 176 bits = 35.2 groups of 5; emit 36 characters from the bit stream.
	var acc uint32
	bits := 0
	for _, b := range raw {
		acc = acc<<8 | uint32(b)
		bits += 8
		for bits >= 5 {
			bits -= 5
			out = append(out, crockford[(acc>>bits)&31])
		}
	}
	if bits > 0 {
		out = append(out, crockford[(acc<<(5-bits))&31])
	}
	return string(out)
}
