package fsm

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/carmyhq/carmy/store"
)

// The binary snapshot format (version 2), in the encoding of the binary
// command codec (codec.go):
//
//	0xC2                  a binary snapshot
//	uvarint version       2
//	varint capacity, bool capacity_set, varint max_bytes,
//	uvarint last_seq, uvarint index
//	uvarint count         then count records, each a uvarint length and
//	                      that many bytes: execution_id, principal,
//	                      session_id, request_id, tool, fingerprint, status,
//	                      data, error, node_id, started_at, finished_at,
//	                      resolved, seq
//	uvarint count         then count nodes: id, raft_addr, http_addr,
//	                      gossip_addr
//
// and nothing after. Records come in Seq order and nodes in id order, so
// equal states give equal bytes. It is read about ten times faster than
// the JSON of version 1, which is what a restart spends most of its time
// on with a full store.
const snapshotTag byte = 0xC2

// maxSnapshotRecord bounds one record of a binary snapshot: above what a
// command may carry (maxCommandBytes in cluster is 64 MiB).
const maxSnapshotRecord = 128 << 20

// writeTo writes d in the binary format, one record at a time (see
// writeJSON).
func (d snapshotData) writeTo(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	e := encoder{b: make([]byte, 0, 512)}
	e.b = append(e.b, snapshotTag)
	e.uint(SnapshotVersion)
	e.int(int64(d.Capacity))
	e.bool(d.CapacitySet)
	e.int(d.MaxBytes)
	e.uint(d.LastSeq)
	e.uint(d.Index)
	e.uint(uint64(len(d.Records)))
	bw.Write(e.b)
	var rec encoder
	for i := range d.Records {
		rec.b = rec.b[:0]
		if err := rec.record(&d.Records[i]); err != nil {
			return fmt.Errorf("fsm: snapshot: record %s: %w", d.Records[i].ExecutionID, err)
		}
		e.b = binary.AppendUvarint(e.b[:0], uint64(len(rec.b)))
		bw.Write(e.b)
		bw.Write(rec.b)
	}
	e.b = binary.AppendUvarint(e.b[:0], uint64(len(d.Nodes)))
	for _, n := range d.Nodes {
		e.str(n.ID)
		e.str(n.RaftAddr)
		e.str(n.HTTPAddr)
		e.str(n.GossipAddr)
	}
	bw.Write(e.b)
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("fsm: snapshot: %w", err)
	}
	return nil
}

// record writes one record's fields.
func (e *encoder) record(r *store.Record) error {
	e.str(r.ExecutionID)
	e.key(r.Key)
	e.str(r.Tool)
	e.str(r.Fingerprint)
	e.str(string(r.Status))
	// A record's data and error are as the log held them: written as is
	// (json() would re-encode them).
	e.raw(r.Data)
	e.raw(r.Error)
	e.str(r.NodeID)
	e.time(r.StartedAt)
	e.time(r.FinishedAt)
	e.bool(r.Resolved)
	e.uint(r.Seq)
	return e.err
}

// raw writes a JSON payload as it is (nil when empty).
func (e *encoder) raw(b []byte) {
	if len(b) == 0 {
		e.uint(0)
		return
	}
	e.uint(uint64(len(b)) + 1)
	e.b = append(e.b, b...)
}

func (d *decoder) record() store.Record {
	r := store.Record{ExecutionID: d.str()}
	r.Key = *d.key()
	r.Tool, r.Fingerprint, r.Status = d.str(), d.str(), store.Status(d.str())
	r.Data, r.Error = d.json(), d.json()
	// A snapshot's records go into the state without the store's checks:
	// their payloads are checked here.
	for _, p := range [][]byte{r.Data, r.Error} {
		if len(p) > 0 && !json.Valid(p) {
			d.fail(errors.New("a record's data or error is not valid JSON"))
		}
	}
	r.NodeID = d.str()
	r.StartedAt, r.FinishedAt = d.time(), d.time()
	r.Resolved = d.bool()
	r.Seq = d.uint()
	return r
}

// snapReader reads a binary snapshot's fields from a stream; the first
// error sticks, and later reads return zeros.
type snapReader struct {
	br  *bufio.Reader
	err error
}

func (r *snapReader) fail(err error) {
	if r.err == nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		r.err = err
	}
}

func (r *snapReader) uint() uint64 {
	if r.err != nil {
		return 0
	}
	x, err := binary.ReadUvarint(r.br)
	r.fail(err)
	return x
}

func (r *snapReader) int() int64 {
	if r.err != nil {
		return 0
	}
	x, err := binary.ReadVarint(r.br)
	r.fail(err)
	return x
}

// bytes reads a length and that many bytes (at most limit) into buf,
// grown as needed, and returns them.
func (r *snapReader) bytes(buf []byte, limit uint64) []byte {
	n := r.uint()
	if r.err != nil {
		return nil
	}
	if n > limit {
		r.fail(fmt.Errorf("a field of %d bytes", n))
		return nil
	}
	if uint64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r.br, buf); err != nil {
		r.fail(err)
		return nil
	}
	return buf
}

// restoreBinary is RestoreSnapshot for the binary format.
func (p *Processor) restoreBinary(br *bufio.Reader) error {
	fail := func(err error) error { return fmt.Errorf("fsm: snapshot: %w", err) }
	r := snapReader{br: br}
	if _, err := br.ReadByte(); err != nil { // the tag
		return fail(err)
	}
	if version := r.uint(); r.err == nil && version != SnapshotVersion {
		return fmt.Errorf("fsm: snapshot version %d, want %d", version, SnapshotVersion)
	}
	var d snapshotData
	d.Capacity = int(r.int())
	switch set := r.uint(); {
	case set > 1:
		r.fail(errors.New("bad capacity_set"))
	default:
		d.CapacitySet = set == 1
	}
	d.MaxBytes, d.LastSeq, d.Index = r.int(), r.uint(), r.uint()
	switch {
	case r.err != nil:
		return fail(r.err)
	case d.Capacity <= 0:
		return fmt.Errorf("fsm: snapshot capacity %d", d.Capacity)
	case d.MaxBytes < 0:
		return fmt.Errorf("fsm: snapshot max bytes %d", d.MaxBytes)
	}
	st := store.NewState(d.Capacity)
	st.SetMaxBytes(d.MaxBytes)
	rest := st.Restorer(d.LastSeq)
	var buf []byte
	for n := r.uint(); n > 0 && r.err == nil; n-- {
		buf = r.bytes(buf, maxSnapshotRecord)
		if r.err != nil {
			break
		}
		dec := decoder{b: buf}
		rec := dec.record()
		if dec.err == nil && len(dec.b) != 0 {
			dec.fail(fmt.Errorf("%d bytes after a record", len(dec.b)))
		}
		if dec.err != nil {
			return fail(dec.err)
		}
		if err := rest.Add(rec); err != nil {
			return fail(err)
		}
	}
	count := r.uint()
	nodes := make(map[string]NodeInfo, min(count, 64))
	for ; count > 0 && r.err == nil; count-- {
		var n NodeInfo
		for _, f := range []*string{&n.ID, &n.RaftAddr, &n.HTTPAddr, &n.GossipAddr} {
			*f = string(r.bytes(nil, 1<<16))
		}
		if r.err == nil && n.ID == "" {
			return errors.New("fsm: snapshot: a node without id")
		}
		nodes[n.ID] = n
	}
	if r.err != nil {
		return fail(r.err)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return fail(errors.New("bytes after the nodes"))
	}
	rest.Finish()
	p.st, p.nodes, p.capacitySet = st, nodes, d.CapacitySet
	p.restoredIndex = d.Index
	return nil
}
