package fsm

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"maps"

	"github.com/carmyhq/carmy/store"
)

// SnapshotVersion is the version of the snapshot format this build writes
// and the only one it reads (snapshot_binary.go). A snapshot of another
// version is refused, with an error naming both versions. Version 1 was
// the JSON of builds before the binary format, and version 2 the binary
// format without the audit ledger, none of them released; they are not
// read, and the numbers are not used again.
const SnapshotVersion = 3

// snapshotData is what a snapshot holds: everything the Processor holds,
// ordered (records by Seq, nodes by id) so that equal states give equal
// bytes.
type snapshotData struct {
	Capacity    int
	CapacitySet bool
	// MaxBytes is the bound on bytes (0: none). The bytes held are not
	// in the snapshot: restore recomputes them from the records.
	MaxBytes int64
	LastSeq  uint64
	Records  []store.Record
	Nodes    []NodeInfo
	// Index is the last entry the FSM had applied when the snapshot was
	// taken (0 in hashes, which compare states, not positions).
	Index uint64
	// Ledger is the audit ledger as of Index (nil: an empty one).
	Ledger *ledgerView
}

// snapshot captures the processor's state. The copy shares no mutable
// memory with the processor (records are copied, their payloads
// immutable), so it can be written out while the processor goes on.
func (p *Processor) snapshot() snapshotData {
	return snapshotData{
		Capacity:    p.st.Capacity(),
		CapacitySet: p.capacitySet,
		MaxBytes:    p.st.MaxBytes(),
		LastSeq:     p.st.LastSeq(),
		Records:     p.st.Records(),
		Nodes:       p.Nodes(),
	}
}

// MarshalSnapshot returns the processor's snapshot bytes.
func (p *Processor) MarshalSnapshot() ([]byte, error) {
	var b bytes.Buffer
	if err := p.snapshot().writeTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// RestoreSnapshot replaces the processor's state with a snapshot's, as
// MarshalSnapshot or FSM.Snapshot wrote it. On error the processor is
// unchanged: bytes of another form or SnapshotVersion, malformed or
// inconsistent (records the store would not hold together) are refused.
//
// The snapshot is read as a stream: each record is decoded and added to
// the new state in turn, so a snapshot is never held in memory as a
// whole, nor its records twice.
func (p *Processor) RestoreSnapshot(r io.Reader) error { return p.restore(r, nil) }

// restore is RestoreSnapshot with the snapshot's ledger given to sink.
func (p *Processor) restore(r io.Reader, sink ledgerSink) error {
	br := bufio.NewReaderSize(r, 256<<10)
	first, err := br.Peek(1)
	if err != nil && err != io.EOF {
		return fmt.Errorf("fsm: snapshot: %w", err)
	}
	if len(first) == 0 || first[0] != snapshotTag {
		return fmt.Errorf("fsm: snapshot: %s", unknownForm(first, snapshotTag))
	}
	return p.restoreBinary(br, sink)
}

// Equal reports whether two processors hold the same state.
func (p *Processor) Equal(o *Processor) bool {
	return p.st.Equal(o.st) && p.st.AccountingEqual(o.st) && p.st.Capacity() == o.st.Capacity() && p.st.MaxBytes() == o.st.MaxBytes() && p.capacitySet == o.capacitySet && maps.Equal(p.nodes, o.nodes)
}
