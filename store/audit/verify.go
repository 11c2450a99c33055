package audit

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
)

// Checkpoint is the {seq, hash} of the last entry pruned from a ledger (or
// the last entry before an export's first): what remains verifies from it.
type Checkpoint = Head

// CheckpointLine appends the export line of a checkpoint:
// {"checkpoint":{"hash":…,"seq":…}} in canonical JSON, and a newline.
func CheckpointLine(dst []byte, c Checkpoint) []byte {
	dst = fmt.Appendf(dst, `{"checkpoint":{"hash":%q,"seq":%d}}`, c.Hash, c.Seq)
	return append(dst, '\n')
}

// MaxLine bounds one line of an export.
const MaxLine = 64 << 10

// BadError names the first entry of an export that does not verify.
type BadError struct {
	// Seq is the sequence number the bad line should have carried: the
	// one after the last good entry (or the anchor).
	Seq uint64
	// Line is the line's number in the file, from 1.
	Line   int
	Reason string
}

func (e *BadError) Error() string {
	return fmt.Sprintf("audit: seq %d (line %d) does not verify: %s", e.Seq, e.Line, e.Reason)
}

// Verified is what Verify established of an export.
type Verified struct {
	// Anchor is where the chain starts: Start, or the checkpoint of the
	// export's first line.
	Anchor Head
	// Head is the last good entry (Anchor when there is none).
	Head Head
	// Entries counts the good entries.
	Entries int
	// Checkpoints counts the good entries of kind KindCheckpoint whose
	// signature was verified (VerifyWith's key), and LastSigned is the seq
	// the last of them signed (0: none).
	Checkpoints int
	LastSigned  uint64
}

// recentHashes is how many of the last entries' hashes the verifier keeps
// to check the head a checkpoint signs (one signs a head a few entries
// back at most: those applied while it was proposed).
const recentHashes = 1 << 16

var hexHash = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Verify reads an export (NDJSON: an optional checkpoint line, then
// entries, each a line as Entry.Line writes it) and checks its chain: each
// line is an entry's canonical JSON, its seq follows the previous one, its
// prev_hash is the previous hash (the anchor's for the first) and its hash
// is ComputeHash's. It returns what verified up to the first bad line, and
// a *BadError naming that line's seq, or an I/O error.
//
// An entry of kind KindCheckpoint must sign an earlier head of the chain
// (its seq and hash as the export holds them).
func Verify(r io.Reader) (Verified, error) { return VerifyWith(r, nil) }

// VerifyWith is Verify that also checks, when pub is not nil, the
// signature of every KindCheckpoint entry by pub (CheckSignature), and
// counts them.
func VerifyWith(r io.Reader, pub ed25519.PublicKey) (Verified, error) {
	br := bufio.NewReaderSize(r, MaxLine)
	v := Verified{Anchor: Start, Head: Start}
	var scratch []byte
	recent := make(map[uint64]string)
	for n := 1; ; n++ {
		line, err := br.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			return v, &BadError{Seq: v.Head.Seq + 1, Line: n, Reason: fmt.Sprintf("a line longer than %d bytes", MaxLine)}
		case err == io.EOF && len(line) == 0:
			return v, nil
		case err == io.EOF:
			return v, &BadError{Seq: v.Head.Seq + 1, Line: n, Reason: "the last line has no newline"}
		case err != nil:
			return v, fmt.Errorf("audit: read line %d: %w", n, err)
		}
		if n == 1 && bytes.HasPrefix(line, []byte(`{"checkpoint":`)) {
			c, reason := parseCheckpoint(line)
			if reason != "" {
				return v, &BadError{Seq: 1, Line: n, Reason: reason}
			}
			v.Anchor, v.Head = c, c
			continue
		}
		e, reason := parseEntry(line, &scratch)
		switch {
		case reason != "":
		case e.Seq != v.Head.Seq+1:
			reason = fmt.Sprintf("seq %d, want %d", e.Seq, v.Head.Seq+1)
		case e.PrevHash != v.Head.Hash:
			reason = fmt.Sprintf("prev_hash %s is not the hash of seq %d (%s)", e.PrevHash, v.Head.Seq, v.Head.Hash)
		case e.ComputeHash(scratch) != e.Hash:
			reason = "hash does not match the entry"
		case e.Kind == KindCheckpoint:
			reason = checkCheckpoint(e, v.Anchor, recent, pub)
		case e.Checkpoint != nil:
			reason = "a checkpoint member in an entry of kind " + string(e.Kind)
		}
		if reason != "" {
			return v, &BadError{Seq: v.Head.Seq + 1, Line: n, Reason: reason}
		}
		v.Head = Head{Seq: e.Seq, Hash: e.Hash}
		v.Entries++
		recent[e.Seq] = e.Hash
		delete(recent, e.Seq-recentHashes)
		if e.Kind == KindCheckpoint && pub != nil {
			v.Checkpoints++
			v.LastSigned = e.Checkpoint.Seq
		}
	}
}

// checkCheckpoint reports why checkpoint entry e does not verify: ""
// when it signs an earlier head of the chain (by pub, when given).
func checkCheckpoint(e Entry, anchor Head, recent map[uint64]string, pub ed25519.PublicKey) string {
	c := e.Checkpoint
	if c == nil {
		return "a checkpoint without its signed head"
	}
	want, ok := recent[c.Seq]
	if c.Seq == anchor.Seq {
		want, ok = anchor.Hash, true
	}
	switch {
	case c.Seq >= e.Seq:
		return fmt.Sprintf("the checkpoint signs seq %d, not an earlier entry", c.Seq)
	case c.Seq < anchor.Seq:
		return fmt.Sprintf("the checkpoint signs seq %d, before the export's first entry", c.Seq)
	case !ok:
		return fmt.Sprintf("the checkpoint signs seq %d, too far back to check", c.Seq)
	case want != c.Hash:
		return fmt.Sprintf("the checkpoint signs hash %s for seq %d, whose hash is %s", c.Hash, c.Seq, want)
	case pub != nil:
		if why := CheckSignature(pub, *c); why != "" {
			return "checkpoint: " + why
		}
	}
	return ""
}

// parseEntry reads one entry's line and checks that it is the entry's
// canonical line, byte for byte.
func parseEntry(line []byte, scratch *[]byte) (Entry, string) {
	var e Entry
	d := json.NewDecoder(bytes.NewReader(line))
	d.DisallowUnknownFields()
	if err := d.Decode(&e); err != nil {
		return Entry{}, "not an entry: " + err.Error()
	}
	*scratch = e.Line((*scratch)[:0])
	if !bytes.Equal(*scratch, line) {
		return Entry{}, "not the canonical JSON of an entry"
	}
	if !hexHash.MatchString(e.PrevHash) || !hexHash.MatchString(e.Hash) {
		return Entry{}, "prev_hash or hash is not 64 lowercase hex digits"
	}
	return e, ""
}

// parseCheckpoint reads a checkpoint line, which must be as
// CheckpointLine writes it.
func parseCheckpoint(line []byte) (Checkpoint, string) {
	var w struct {
		Checkpoint *Checkpoint `json:"checkpoint"`
	}
	d := json.NewDecoder(bytes.NewReader(line))
	d.DisallowUnknownFields()
	if err := d.Decode(&w); err != nil || w.Checkpoint == nil {
		return Checkpoint{}, "not a checkpoint"
	}
	if !bytes.Equal(CheckpointLine(nil, *w.Checkpoint), line) || !hexHash.MatchString(w.Checkpoint.Hash) {
		return Checkpoint{}, "not the canonical JSON of a checkpoint"
	}
	return *w.Checkpoint, ""
}
