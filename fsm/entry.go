package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A Raft log entry of this FSM is a batch: the commands of one proposer
// round, in order:
//
//	0xB1                  the batch format, version 1 (forms.go)
//	uvarint count         1 ≤ count ≤ MaxBatchCommands
//	count × (uvarint n, n bytes of one command, as Encode writes it)
//
// nothing after the last command. The FSM applies a batch's commands one
// by one and answers a Responses, one Response per command in the same
// order. One entry per round is what makes a round cheap: one BoltDB key,
// one Raft frame, one follower append and one apply dispatch for all of
// its commands.
//
// An entry that is not a batch this build reads (another first byte, a
// malformed batch) is applied as a refusal: it changes nothing, on every
// replica alike, and its proposer learns why (FSM.Apply).
const batchTag byte = 0xB1

// positionBits is how many low bits of a fencing token hold a command's
// position in its batch entry (Token).
const positionBits = 12

// MaxBatchCommands bounds the commands of one batch entry: a command's
// position must fit the low positionBits bits of its fencing token. A
// proposer round with more commands than that takes several entries.
const MaxBatchCommands = 1 << positionBits

// MaxTokenIndex bounds the index of a batch entry: Token(index, pos) stays
// below 2^53, so that every JSON client reads a fencing token exactly.
// 2^41 entries last 70 years at a thousand entries a second; the commands
// of an entry past it are refused alike on every replica rather than
// given tokens a client would round.
const MaxTokenIndex = 1<<(53-positionBits) - 1

// Token is the fencing token (store.Record.Seq) of the command at
// position pos of the batch entry at log index: index × 2^12 + pos. It
// grows strictly in commit order and is unique per command.
func Token(index uint64, pos int) uint64 { return index<<positionBits | uint64(pos) }

// ErrMalformedBatch is returned by DecodeBatch for bytes that are not a
// batch entry.
var ErrMalformedBatch = errors.New("fsm: malformed batch entry")

// IsBatch reports whether entry data begins as a batch entry does (else
// it is of a form this build does not read).
func IsBatch(data []byte) bool { return len(data) > 0 && data[0] == batchTag }

// BatchSize returns the bytes EncodeBatch will need for cmds.
func BatchSize(cmds [][]byte) int {
	n := 1 + uvarintLen(uint64(len(cmds)))
	for _, c := range cmds {
		n += uvarintLen(uint64(len(c))) + len(c)
	}
	return n
}

// EncodeBatch returns the batch entry holding cmds (each as Encode returns
// it), in order. It fails for no commands or more than MaxBatchCommands.
func EncodeBatch(cmds [][]byte) ([]byte, error) {
	if len(cmds) == 0 || len(cmds) > MaxBatchCommands {
		return nil, fmt.Errorf("%w: %d commands, want 1 to %d", ErrMalformedBatch, len(cmds), MaxBatchCommands)
	}
	b := make([]byte, 0, BatchSize(cmds))
	b = append(b, batchTag)
	b = binary.AppendUvarint(b, uint64(len(cmds)))
	for _, c := range cmds {
		b = binary.AppendUvarint(b, uint64(len(c)))
		b = append(b, c...)
	}
	return b, nil
}

// DecodeBatch returns the commands of a batch entry, in order. Each is a
// sub-slice of data (not copied), to be decoded with Decode. It fails,
// returning nothing, for anything but a whole, well-formed batch: a wrong
// tag, a count of 0 or over MaxBatchCommands, a length past the end, or
// bytes after the last command.
func DecodeBatch(data []byte) ([][]byte, error) {
	if !IsBatch(data) {
		return nil, fmt.Errorf("%w: %s", ErrMalformedBatch, unknownForm(data, batchTag))
	}
	rest := data[1:]
	count, k := binary.Uvarint(rest)
	if k <= 0 || count == 0 || count > MaxBatchCommands {
		return nil, fmt.Errorf("%w: bad count", ErrMalformedBatch)
	}
	rest = rest[k:]
	// Every command takes at least one byte (its length), so a count
	// above what is left is refused before anything is allocated for it.
	if count > uint64(len(rest)) {
		return nil, fmt.Errorf("%w: %d commands in %d bytes", ErrMalformedBatch, count, len(rest))
	}
	cmds := make([][]byte, count)
	for i := range cmds {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) {
			return nil, fmt.Errorf("%w: command %d runs past the end", ErrMalformedBatch, i)
		}
		rest = rest[k:]
		cmds[i] = rest[:n:n]
		rest = rest[n:]
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last command", ErrMalformedBatch, len(rest))
	}
	return cmds, nil
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}
