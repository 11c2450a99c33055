package fsm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"

	"github.com/carmyhq/carmy/store"
)

// SnapshotVersion is the version of the snapshot format this build writes:
// the binary one (snapshot_binary.go). Version 1, the JSON of earlier
// builds, is still read.
const SnapshotVersion = 2

// snapshotJSONVersion is the version of the JSON snapshot format.
const snapshotJSONVersion = 1

// snapshotData is what a snapshot holds: everything the Processor holds,
// ordered (records by Seq, nodes by id) so that equal states give equal
// bytes. Its JSON is the snapshot format of version 1.
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
// memory with the processor (records are copied, their payloads
// immutable), so it can be written out while the processor goes on.
func (p *Processor) snapshot() snapshotData {
	return snapshotData{
		Version:     snapshotJSONVersion,
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

// MarshalSnapshotJSON returns the processor's snapshot in the JSON format
// of earlier builds (version 1), which RestoreSnapshot still reads; for
// tests and tools.
func (p *Processor) MarshalSnapshotJSON() ([]byte, error) {
	var b bytes.Buffer
	if err := p.snapshot().writeJSON(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// writeJSON writes d as the JSON of snapshotData, the bytes json.Marshal
// would give, one record at a time: a snapshot of a full store is never
// held in memory as a whole, only its records' structs (their payloads
// shared with the state) and one record's JSON at a time.
func (d snapshotData) writeJSON(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	hb, err := json.Marshal(struct {
		Version     int    `json:"version"`
		Capacity    int    `json:"capacity"`
		CapacitySet bool   `json:"capacity_set"`
		MaxBytes    int64  `json:"max_bytes,omitempty"`
		LastSeq     uint64 `json:"last_seq"`
	}{d.Version, d.Capacity, d.CapacitySet, d.MaxBytes, d.LastSeq})
	if err != nil {
		return fmt.Errorf("fsm: snapshot: %w", err)
	}
	bw.Write(hb[:len(hb)-1]) // without its closing brace
	if err := writeArray(bw, `,"records":`, d.Records); err != nil {
		return err
	}
	if err := writeArray(bw, `,"nodes":`, d.Nodes); err != nil {
		return err
	}
	if d.Index != 0 {
		fmt.Fprintf(bw, `,"index":%d`, d.Index)
	}
	bw.WriteByte('}')
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("fsm: snapshot: %w", err)
	}
	return nil
}

// writeArray writes name and the JSON array of items (null for nil, as
// json.Marshal writes a nil slice), one item at a time. Write errors are
// left to the caller's Flush, which reports the first.
func writeArray[T any](bw *bufio.Writer, name string, items []T) error {
	bw.WriteString(name)
	if items == nil {
		bw.WriteString("null")
		return nil
	}
	bw.WriteByte('[')
	for i := range items {
		if i > 0 {
			bw.WriteByte(',')
		}
		b, err := json.Marshal(&items[i])
		if err != nil {
			return fmt.Errorf("fsm: snapshot: %w", err)
		}
		bw.Write(b)
	}
	bw.WriteByte(']')
	return nil
}

// RestoreSnapshot replaces the processor's state with a snapshot's. On
// error the processor is unchanged.
//
// The snapshot is read as a stream: each record is decoded and added to
// the new state in turn, so a snapshot is never held in memory as a
// whole, nor its records twice. Its settings (version, capacity, bounds,
// last_seq) must come before its records, as every build writes them.
// Unknown members are skipped.
func (p *Processor) RestoreSnapshot(r io.Reader) error {
	br := bufio.NewReaderSize(r, 256<<10)
	if first, err := br.Peek(1); err == nil && first[0] == snapshotTag {
		return p.restoreBinary(br)
	}
	dec := json.NewDecoder(br)
	fail := func(err error) error { return fmt.Errorf("fsm: snapshot: %w", err) }
	if err := expectDelim(dec, '{'); err != nil {
		return fail(err)
	}
	var (
		d    snapshotData
		st   *store.State
		rest *store.Restorer
	)
	// start checks the settings read so far and begins the new state.
	start := func() error {
		if d.Version != snapshotJSONVersion {
			return fmt.Errorf("fsm: snapshot version %d, want %d", d.Version, snapshotJSONVersion)
		}
		if d.Capacity <= 0 {
			return fmt.Errorf("fsm: snapshot capacity %d", d.Capacity)
		}
		if d.MaxBytes < 0 {
			return fmt.Errorf("fsm: snapshot max bytes %d", d.MaxBytes)
		}
		st = store.NewState(d.Capacity)
		st.SetMaxBytes(d.MaxBytes)
		rest = st.Restorer(d.LastSeq)
		return nil
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fail(err)
		}
		name, _ := tok.(string)
		var field any
		switch name {
		case "version":
			field = &d.Version
		case "capacity":
			field = &d.Capacity
		case "capacity_set":
			field = &d.CapacitySet
		case "max_bytes":
			field = &d.MaxBytes
		case "last_seq":
			field = &d.LastSeq
		case "index":
			field = &d.Index
		case "nodes":
			field = &d.Nodes
		case "records":
			if rest != nil {
				return fail(errors.New("records twice"))
			}
			if err := start(); err != nil {
				return err
			}
			if err := restoreRecords(dec, rest); err != nil {
				return fail(err)
			}
			continue
		default:
			field = new(json.RawMessage) // skipped
		}
		switch name {
		case "version", "capacity", "max_bytes", "last_seq":
			if rest != nil {
				// The records were checked against the settings
				// read before them.
				return fail(fmt.Errorf("%q after the records", name))
			}
		}
		if err := dec.Decode(field); err != nil {
			return fail(fmt.Errorf("%s: %w", name, err))
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return fail(err)
	}
	if rest == nil {
		if err := start(); err != nil {
			return err
		}
	}
	nodes := make(map[string]NodeInfo, len(d.Nodes))
	for _, n := range d.Nodes {
		if n.ID == "" {
			return fmt.Errorf("fsm: snapshot: a node without id")
		}
		nodes[n.ID] = n
	}
	rest.Finish()
	p.st, p.nodes, p.capacitySet = st, nodes, d.CapacitySet
	p.restoredIndex = d.Index
	return nil
}

// restoreRecords reads the records array (or null) and adds each record
// to rest as it is decoded.
func restoreRecords(dec *json.Decoder, rest *store.Restorer) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("records: %w", err)
	}
	if tok == nil {
		return nil // null: no records
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return fmt.Errorf("records: %v, want an array", tok)
	}
	for dec.More() {
		var rec store.Record
		if err := dec.Decode(&rec); err != nil {
			return fmt.Errorf("records: %w", err)
		}
		if err := rest.Add(rec); err != nil {
			return err
		}
	}
	return expectDelim(dec, ']')
}

// expectDelim reads the next token, which must be want.
func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("%v, want %v", tok, want)
	}
	return nil
}

// Equal reports whether two processors hold the same state.
func (p *Processor) Equal(o *Processor) bool {
	return p.st.Equal(o.st) && p.st.AccountingEqual(o.st) && p.st.Capacity() == o.st.Capacity() && p.st.MaxBytes() == o.st.MaxBytes() && p.capacitySet == o.capacitySet && maps.Equal(p.nodes, o.nodes)
}
