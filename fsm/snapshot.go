package fsm

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"

	"github.com/carmyhq/carmy/store"
)

// SnapshotVersion is the snapshot format's version.
const SnapshotVersion = 1

// snapshotData is the snapshot format: everything the Processor holds,
// ordered (records by Seq, nodes by id) so that equal states give equal
// bytes.
type snapshotData struct {
	Version     int  `json:"version"`
	Capacity    int  `json:"capacity"`
	CapacitySet bool `json:"capacity_set"`
	// MaxBytes is the bound on bytes (absent: none). The bytes held are
	// not in the snapshot: restore recomputes them from the records.
	MaxBytes int64          `json:"max_bytes,omitempty"`
	LastSeq  uint64         `json:"last_seq"`
	Records  []store.Record `json:"records"`
	Nodes    []NodeInfo     `json:"nodes"`
	// Index is the last entry the FSM had applied when the snapshot was
	// taken (absent in hashes, which compare states, not positions).
	Index uint64 `json:"index,omitempty"`
}

// snapshot captures the processor's state. The copy shares no mutable
// memory with the processor (record payloads are immutable).
func (p *Processor) snapshot() snapshotData {
	return snapshotData{
		Version:     SnapshotVersion,
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
	return json.Marshal(p.snapshot())
}

// marshalSnapshotAt returns the snapshot bytes recording that the FSM had
// applied the log up to index.
func (p *Processor) marshalSnapshotAt(index uint64) ([]byte, error) {
	d := p.snapshot()
	d.Index = index
	return json.Marshal(d)
}

// RestoreSnapshot replaces the processor's state with a snapshot's. On
// error the processor is unchanged.
func (p *Processor) RestoreSnapshot(r io.Reader) error {
	var d snapshotData
	dec := json.NewDecoder(r)
	if err := dec.Decode(&d); err != nil {
		return fmt.Errorf("fsm: snapshot: %w", err)
	}
	if d.Version != SnapshotVersion {
		return fmt.Errorf("fsm: snapshot version %d, want %d", d.Version, SnapshotVersion)
	}
	if d.Capacity <= 0 {
		return fmt.Errorf("fsm: snapshot capacity %d", d.Capacity)
	}
	if d.MaxBytes < 0 {
		return fmt.Errorf("fsm: snapshot max bytes %d", d.MaxBytes)
	}
	st := store.NewState(d.Capacity)
	st.SetMaxBytes(d.MaxBytes)
	if err := st.Restore(d.Records, d.LastSeq); err != nil {
		return fmt.Errorf("fsm: snapshot: %w", err)
	}
	nodes := make(map[string]NodeInfo, len(d.Nodes))
	for _, n := range d.Nodes {
		if n.ID == "" {
			return fmt.Errorf("fsm: snapshot: a node without id")
		}
		nodes[n.ID] = n
	}
	p.st, p.nodes, p.capacitySet = st, nodes, d.CapacitySet
	p.restoredIndex = d.Index
	return nil
}

// Equal reports whether two processors hold the same state.
func (p *Processor) Equal(o *Processor) bool {
	return p.st.Equal(o.st) && p.st.AccountingEqual(o.st) && p.st.Capacity() == o.st.Capacity() && p.st.MaxBytes() == o.st.MaxBytes() && p.capacitySet == o.capacitySet && maps.Equal(p.nodes, o.nodes)
}
