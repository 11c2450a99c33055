package fsm

import "bytes"

// SnapshotParts is what a snapshot holds, for tests that write one by hand.
type SnapshotParts = snapshotData

// WriteSnapshot writes d as a snapshot of the given format version,
// unchecked and in the order given: the bytes of a corrupted or foreign
// file, or of another version.
func WriteSnapshot(d SnapshotParts, version uint64) ([]byte, error) {
	var b bytes.Buffer
	err := d.writeVersion(&b, version)
	return b.Bytes(), err
}

// Commits returns how many commits l's writer has begun.
func (l *Ledger) Commits() uint64 {
	l.q.mu.Lock()
	defer l.q.mu.Unlock()
	return l.q.commits
}
