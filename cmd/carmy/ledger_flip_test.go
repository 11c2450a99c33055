package main_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/carmyhq/carmy/store/audit"
)

// Flipping bytes of an export: every changed byte of an entry must make
// the verifier name that entry's seq. The in-process verifier
// (audit.Verify, the code `carmy audit verify` runs) checks each flipped
// entry in a window of the export anchored, by a checkpoint line, at the
// head just before it (or at the head a checkpoint entry signs): the
// verifier reads an export line by line and stops at the first bad one, so
// what it says of the whole file with one changed entry is what it says of
// that window, which keeps a 100,000-entry export affordable.

// flipMasks are XORed into a byte: the lowest bit (a digit or letter
// becomes its neighbour), the ASCII case bit, and the high bit (invalid
// UTF-8).
var flipMasks = []byte{0x01, 0x20, 0x80}

// entryMembers are the member names of an entry's line, those of its
// checkpoint included ("hash" and "seq" occur in both).
var entryMembers = []string{"actor", "checkpoint", "execution_id", "fingerprint", "hash", "key_id", "kind",
	"prev_hash", "principal", "seq", "signature", "status", "target", "time", "tool"}

// fieldPositions returns byte offsets of line that cover every member:
// the first letter of its name, the first byte of its value and a byte in
// its value's middle; and the line's braces and newline.
func fieldPositions(line []byte) []int {
	pos := []int{0, len(line) - 2, len(line) - 1}
	for _, name := range entryMembers {
		key := []byte(`"` + name + `":`)
		for from := 0; ; {
			i := bytes.Index(line[from:], key)
			if i < 0 {
				break
			}
			i += from
			v := i + len(key)
			end := v + 1
			if line[v] == '"' {
				end = v + 1 + bytes.IndexByte(line[v+1:], '"')
			} else {
				for end < len(line) && line[end] != ',' && line[end] != '}' {
					end++
				}
			}
			pos = append(pos, i+1, v, (v+end)/2)
			from = v
		}
	}
	slices.Sort(pos)
	return slices.Compact(pos)
}

// flipWindow returns the export window that verifies entry i (0-based)
// after the checkpoint line of its anchor: the entries from after the
// anchor to i, entry i with mask XORed into its byte pos (mask 0: as it
// is).
func flipWindow(lines [][]byte, s ledgerSummary, i, pos int, mask byte) []byte {
	anchor := i - 1
	if signed := int(s.Signed[i]); signed > 0 {
		anchor = min(anchor, signed-1)
	}
	var b []byte
	if anchor >= 0 {
		b = audit.CheckpointLine(b, s.Heads[anchor])
	}
	for j := anchor + 1; j < i; j++ {
		b = append(b, lines[j]...)
	}
	at := len(b)
	b = append(b, lines[i]...)
	b[at+pos] ^= mask
	return b
}

// checkFlips flips bytes of the entries every (each of its bytes, by each
// of flipMasks) and sample (a byte of each member, by the first mask) and
// returns how many flips it checked and how any of them was not named.
func checkFlips(lines [][]byte, s ledgerSummary, every, sample []int) (int, []string) {
	var problems []string
	flips := 0
	check := func(i, pos int, mask byte) {
		flips++
		_, err := audit.Verify(bytes.NewReader(flipWindow(lines, s, i, pos, mask)))
		var bad *audit.BadError
		if !errors.As(err, &bad) || bad.Seq != s.Heads[i].Seq {
			if len(problems) < 20 {
				problems = append(problems, fmt.Sprintf("seq %d, byte %d (%q) ^ %#x: %v", s.Heads[i].Seq, pos, lines[i][pos], mask, err))
			}
		}
	}
	control := func(i int) bool {
		if _, err := audit.Verify(bytes.NewReader(flipWindow(lines, s, i, 0, 0))); err != nil {
			problems = append(problems, fmt.Sprintf("the window of seq %d does not verify unchanged: %v", s.Heads[i].Seq, err))
			return false
		}
		return true
	}
	for _, i := range every {
		if !control(i) {
			continue
		}
		for pos := range lines[i] {
			for _, m := range flipMasks {
				check(i, pos, m)
			}
		}
	}
	for _, i := range sample {
		if !control(i) {
			continue
		}
		for _, pos := range fieldPositions(lines[i]) {
			check(i, pos, flipMasks[0])
		}
	}
	return flips, problems
}
