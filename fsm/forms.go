package fsm

import "fmt"

// The forms this package writes, each named by its first byte, which is
// also its version: a form that an older reader would misread takes a new
// byte (or, for a snapshot, a new SnapshotVersion), and a reader refuses a
// byte or version it does not know rather than guess.
//
//	0xB1  a log entry: a batch of commands, version 1 (entry.go)
//	0xC3  one command, version 2 (codec.go); 0xC1, version 1 without
//	      the proposer's time and actor, is not read (no release wrote it)
//	0xC2  a snapshot (snapshot_binary.go); its version, SnapshotVersion,
//	      is the first field of its header
//	0x01  a Response sent to another node, version 1 (response_codec.go)
//
// No form of an earlier build is read (there has been no release, so no
// released build wrote one). A reader that a later change must keep for
// an older form goes in compat.go, under the rule of docs/design.md
// ("Compatibility").

// unknownForm describes bytes that do not begin with want, the first byte
// of the only form this build reads there.
func unknownForm(b []byte, want byte) string {
	if len(b) == 0 {
		return "empty"
	}
	return fmt.Sprintf("a form this build does not read (first byte %#02x, want %#02x)", b[0], want)
}

// VersionError is a refusal of bytes of a form's version that this build
// does not read: a newer build's, or an older one whose reader was
// deleted (docs/design.md, "Compatibility"). Nothing of them was read.
type VersionError struct {
	Form    string // what was refused: "snapshot"
	Version uint64 // the version the bytes carry
	Want    uint64 // the version this build reads
}

func (e *VersionError) Error() string {
	by := "an older build, whose form this build no longer reads"
	if e.Version > e.Want {
		by = "a newer build: upgrade this node"
	}
	return fmt.Sprintf("fsm: %s of format version %d, this build reads version %d (written by %s)", e.Form, e.Version, e.Want, by)
}
