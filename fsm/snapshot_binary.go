package fsm

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/audit"
)

// The snapshot format, version 2 (SnapshotVersion), in the encoding of
// the binary command codec (codec.go): the tag, then blocks, each a
// uvarint length and that many bytes, read with the codec's decoder:
//
//	0xC2        a snapshot (forms.go)
//	header      version (2), capacity, capacity_set, max_bytes, last_seq,
//	            index, the count of records
//	records     one block each: execution_id, principal, session_id,
//	            request_id, tool, fingerprint, status, data, error,
//	            node_id, started_at, finished_at, resolved, seq, and for
//	            a gated record its gate and decision (codec_approval.go)
//	nodes       the count of nodes, then each: id, raft_addr, http_addr,
//	            gossip_addr
//	ledger      the audit ledger's checkpoint (seq, hash) and head (seq,
//	            hash), then head.seq − checkpoint.seq blocks, one per entry
//	            in seq order: its time (8 bytes, Unix ns, big endian) and
//	            its export line (ledger.go); no entries when the FSM has
//	            no ledger
//
// and nothing after. Records come in Seq order and nodes in id order, so
// equal states give equal bytes. Version 2 had no ledger.
//
// What every later version must keep, so that this build can name it: the
// tag, and a first block that begins with the version (a uvarint). A
// reader checks the version before anything else of the header, and
// refuses a version it does not read, naming both, rather than misread
// the rest.
const snapshotTag byte = 0xC2

// maxSnapshotBlock bounds one block of a binary snapshot: above what a
// command may carry (maxCommandBytes in cluster is 64 MiB).
const maxSnapshotBlock = 128 << 20

// writeTo writes d in the format of SnapshotVersion, one record at a
// time: a snapshot of a full store is never held in memory as a whole,
// only its records' structs (their payloads shared with the state) and
// one record's bytes at a time.
func (d snapshotData) writeTo(w io.Writer) error { return d.writeVersion(w, SnapshotVersion) }

// writeVersion is writeTo with the header's version given (tests write
// others).
func (d snapshotData) writeVersion(w io.Writer, version uint64) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	bw.WriteByte(snapshotTag)
	var e encoder
	block := func() {
		var n [binary.MaxVarintLen64]byte
		bw.Write(binary.AppendUvarint(n[:0], uint64(len(e.b))))
		bw.Write(e.b)
		e.b = e.b[:0]
	}
	e.uint(version)
	e.int(int64(d.Capacity))
	e.bool(d.CapacitySet)
	e.int(d.MaxBytes)
	e.uint(d.LastSeq)
	e.uint(d.Index)
	e.uint(uint64(len(d.Records)))
	block()
	for i := range d.Records {
		err := e.record(&d.Records[i])
		if e.approval(&d.Records[i]); err == nil {
			err = e.err
		}
		if err != nil {
			return fmt.Errorf("fsm: snapshot: record %s: %w", d.Records[i].ExecutionID, err)
		}
		block()
	}
	e.uint(uint64(len(d.Nodes)))
	for _, n := range d.Nodes {
		e.str(n.ID)
		e.str(n.RaftAddr)
		e.str(n.HTTPAddr)
		e.str(n.GossipAddr)
	}
	block()
	cp, head := audit.Start, audit.Start
	if d.Ledger != nil {
		cp, head = d.Ledger.cp, d.Ledger.head
	}
	e.uint(cp.Seq)
	e.str(cp.Hash)
	e.uint(head.Seq)
	e.str(head.Hash)
	block()
	if d.Ledger != nil {
		n := uint64(0)
		err := d.Ledger.each(func(val []byte) error {
			e.b = append(e.b, val...)
			block()
			n++
			return nil
		})
		if err == nil && n != head.Seq-cp.Seq {
			err = fmt.Errorf("%d ledger entries from %d to %d", n, cp.Seq, head.Seq)
		}
		if err != nil {
			return fmt.Errorf("fsm: snapshot: audit ledger: %w", err)
		}
	}
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
	// The resolved byte: 0 not resolved, 1 resolved by nobody named, 2
	// resolved and by whom (a string follows).
	switch {
	case r.Resolved && r.ResolvedBy != "":
		e.b = append(e.b, 2)
		e.str(r.ResolvedBy)
	default:
		e.bool(r.Resolved)
	}
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
	switch b := d.bytes(1); {
	case len(b) == 1 && b[0] == 2:
		r.Resolved, r.ResolvedBy = true, d.str()
	case len(b) == 1 && b[0] <= 1:
		r.Resolved = b[0] == 1
	case len(b) == 1:
		d.fail(fmt.Errorf("resolved %d", b[0]))
	}
	r.Seq = d.uint()
	return r
}

// ledgerSink takes a snapshot's ledger: its checkpoint and head, and next,
// which returns each entry's block in turn (head.Seq − cp.Seq of them).
// It must read them all, or fail.
type ledgerSink func(index uint64, cp, head audit.Head, next func() ([]byte, error)) error

// restoreBinary is RestoreSnapshot after the tag was seen; the ledger's
// part goes to sink (nil: read and dropped).
func (p *Processor) restoreBinary(br *bufio.Reader, sink ledgerSink) error {
	fail := func(err error) error { return fmt.Errorf("fsm: snapshot: %w", err) }
	if _, err := br.ReadByte(); err != nil { // the tag
		return fail(err)
	}
	var buf []byte
	// next reads the next block into buf and returns a decoder over it.
	next := func() (*decoder, error) {
		n, err := binary.ReadUvarint(br)
		if err == nil && n > maxSnapshotBlock {
			err = fmt.Errorf("a block of %d bytes", n)
		}
		if err == nil {
			if uint64(cap(buf)) < n {
				buf = make([]byte, n)
			}
			buf = buf[:n]
			_, err = io.ReadFull(br, buf)
		}
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return &decoder{b: buf}, err
	}
	// done checks that a block was read whole, and nothing more.
	done := func(d *decoder) error {
		if d.err == nil && len(d.b) != 0 {
			d.fail(fmt.Errorf("%d bytes after a block", len(d.b)))
		}
		return d.err
	}

	h, err := next()
	if err != nil {
		return fail(err)
	}
	// The version first: the rest of a header of another version need
	// not read as this one's.
	switch version := h.uint(); {
	case h.err != nil:
		return fail(fmt.Errorf("version: %w", h.err))
	case version != SnapshotVersion:
		return &VersionError{Form: "snapshot", Version: version, Want: SnapshotVersion}
	}
	var sd snapshotData
	sd.Capacity = int(h.int())
	sd.CapacitySet = h.bool()
	sd.MaxBytes, sd.LastSeq, sd.Index = h.int(), h.uint(), h.uint()
	count := h.uint()
	switch err := done(h); {
	case err != nil:
		return fail(err)
	case sd.Capacity <= 0:
		return fmt.Errorf("fsm: snapshot capacity %d", sd.Capacity)
	case sd.MaxBytes < 0:
		return fmt.Errorf("fsm: snapshot max bytes %d", sd.MaxBytes)
	}
	st := store.NewState(sd.Capacity)
	st.SetMaxBytes(sd.MaxBytes)
	rest := st.Restorer(sd.LastSeq)
	for ; count > 0; count-- {
		d, err := next()
		if err != nil {
			return fail(err)
		}
		rec := d.record()
		d.approval(&rec)
		if err := done(d); err != nil {
			return fail(err)
		}
		if err := rest.Add(rec); err != nil {
			return fail(err)
		}
	}
	d, err := next()
	if err != nil {
		return fail(err)
	}
	nodes := make(map[string]NodeInfo)
	for n := d.uint(); n > 0 && d.err == nil; n-- {
		info := NodeInfo{ID: d.str(), RaftAddr: d.str(), HTTPAddr: d.str(), GossipAddr: d.str()}
		if d.err == nil && info.ID == "" {
			return errors.New("fsm: snapshot: a node without id")
		}
		nodes[info.ID] = info
	}
	if err := done(d); err != nil {
		return fail(err)
	}
	if d, err = next(); err != nil {
		return fail(err)
	}
	cp := audit.Head{Seq: d.uint(), Hash: d.str()}
	head := audit.Head{Seq: d.uint(), Hash: d.str()}
	if err := done(d); err != nil {
		return fail(err)
	}
	if head.Seq < cp.Seq {
		return fail(fmt.Errorf("audit ledger head %d before its checkpoint %d", head.Seq, cp.Seq))
	}
	nextEntry := func() ([]byte, error) {
		d, err := next()
		return d.b, err
	}
	if sink == nil {
		sink = func(_ uint64, cp, head audit.Head, next func() ([]byte, error)) error {
			for n := head.Seq - cp.Seq; n > 0; n-- {
				if _, err := next(); err != nil {
					return err
				}
			}
			return nil
		}
	}
	if err := sink(sd.Index, cp, head, nextEntry); err != nil {
		return fail(err)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return fail(errors.New("bytes after the audit ledger"))
	}
	rest.Finish()
	p.st, p.nodes, p.capacitySet = st, nodes, sd.CapacitySet
	p.restoredIndex = sd.Index
	return nil
}
