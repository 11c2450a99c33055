package fsm

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/audit"
)

// The binary command codec. Every replica decodes every command it
// applies, so the decoding is on every node's hot path and in every
// restart's replay; this format decodes several times faster than JSON.
//
//	0xC3            binary command, version 2 (the tag: forms.go)
//	type            one byte (typeCodes)
//	at, actor       when and by whom it was proposed (a time, a string)
//	fields          the type's payload, in a fixed order (see encodeBody)
//
// A string or byte string is a uvarint length and its bytes; a JSON
// payload (a result's data or error) is the same with length+1, 0 meaning
// none; an integer is a varint (signed) or uvarint; a bool one byte, 0 or
// 1; a time its Unix seconds (varint), nanoseconds (uvarint) and zone
// offset in seconds (varint; 0 is UTC). Nothing may follow the payload.
//
// A JSON payload is written as encoding/json writes a json.RawMessage
// (compacted, with <, > and & escaped; Logged), so every replica's record
// holds the same bytes.
const commandTag byte = 0xC3

// typeCodes numbers the command types in the binary format. Codes are
// never reused.
var typeCodes = map[Type]byte{
	TypeReserve: 1, TypeComplete: 2, TypeCancel: 3, TypeResolve: 4, TypeRelease: 5,
	TypeInterrupt: 6, TypeExpire: 7, TypeCapacity: 8, TypeNode: 9, TypeNodeRemoved: 10,
	TypeAdmin: 11, TypeAuditPrune: 12, TypeAuditCheckpoint: 13, TypeDecide: 14,
}

// codeTypes is typeCodes inverted, indexed by code.
var codeTypes = func() [16]Type {
	var t [16]Type
	for typ, code := range typeCodes {
		t[code] = typ
	}
	return t
}()

// Encode returns the command's log bytes, in the binary format. It fails
// (store.ErrInvalid) for an unknown type, a missing payload, or a result
// whose data or error is not valid JSON.
func Encode(c Command) ([]byte, error) {
	code, ok := typeCodes[c.Type]
	if !ok {
		return nil, fmt.Errorf("%w: fsm: encode: unknown command type %q", store.ErrInvalid, c.Type)
	}
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("%w: fsm: encode %s: %w", store.ErrInvalid, c.Type, err)
	}
	e := encoder{b: make([]byte, 0, 128)}
	e.b = append(e.b, commandTag, code)
	e.time(c.At)
	e.str(c.Actor)
	err := e.body(c)
	if err == nil {
		err = e.err
	}
	if err != nil {
		return nil, fmt.Errorf("%w: fsm: encode %s: %w", store.ErrInvalid, c.Type, err)
	}
	return e.b, nil
}

// PeekType returns the type of an encoded command without decoding it
// (for logs and metrics; the FSM decodes and decides). ok is false when
// data does not begin like a command.
func PeekType(data []byte) (t Type, ok bool) {
	if len(data) >= 2 && data[0] == commandTag && int(data[1]) < len(codeTypes) && codeTypes[data[1]] != "" {
		return codeTypes[data[1]], true
	}
	return "", false
}

// encoder appends fields to b; the first field that cannot be written
// sets err.
type encoder struct {
	b   []byte
	err error
}

func (e *encoder) str(s string) {
	e.b = binary.AppendUvarint(e.b, uint64(len(s)))
	e.b = append(e.b, s...)
}

func (e *encoder) uint(x uint64) { e.b = binary.AppendUvarint(e.b, x) }
func (e *encoder) int(x int64)   { e.b = binary.AppendVarint(e.b, x) }

func (e *encoder) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

func (e *encoder) time(t time.Time) {
	// A time JSON cannot write could not be in a snapshot either.
	if y := t.Year(); y < 0 || y > 9999 {
		if e.err == nil {
			e.err = fmt.Errorf("time %v outside years 0-9999", t)
		}
		return
	}
	_, off := t.Zone()
	e.int(t.Unix())
	e.uint(uint64(t.Nanosecond()))
	e.int(int64(off))
}

// Logged returns a result's data or error as a command's log entry holds
// it, and so as every replica's record holds it: compacted, with <, > and
// & escaped, as encoding/json writes a json.RawMessage; nil when empty. It
// fails for bytes that are not JSON.
func Logged(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	return json.Marshal(raw)
}

// json writes a JSON payload as Logged gives it (none when empty).
func (e *encoder) json(raw json.RawMessage) error {
	b, err := Logged(raw)
	if err != nil {
		return err
	}
	if b == nil {
		e.uint(0)
		return nil
	}
	e.uint(uint64(len(b)) + 1)
	e.b = append(e.b, b...)
	return nil
}

func (e *encoder) key(k store.Key) {
	e.str(k.Principal)
	e.str(k.Session)
	e.str(k.RequestID)
}

func (e *encoder) result(r store.Result) error {
	e.str(r.ExecutionID)
	e.str(string(r.Status))
	if err := e.json(r.Data); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	if err := e.json(r.Error); err != nil {
		return fmt.Errorf("error: %w", err)
	}
	e.time(r.FinishedAt)
	e.int(r.ByteQuota)
	return nil
}

// body writes the payload of c's type (c.check has passed).
func (e *encoder) body(c Command) error {
	switch c.Type {
	case TypeReserve:
		x := c.Execution
		e.key(*c.Key)
		e.str(c.Fingerprint)
		e.str(x.ID)
		e.str(x.Tool)
		e.str(x.NodeID)
		e.time(x.StartedAt)
		e.int(int64(x.Quota))
		e.int(x.ByteQuota)
		e.int(x.Headroom)
		e.int(int64(x.DedupeWindow))
		if x.RetryUncertain || x.Approval != nil {
			// Written only when set, or when an approval gate follows: a
			// reservation that neither retries nor is gated ends after the
			// window, as before the flag existed.
			e.bool(x.RetryUncertain)
		}
		if x.Approval != nil {
			// Written only when set, after the flag: a reservation without
			// a gate reads as before gates existed.
			e.gate(x.Approval)
		}
	case TypeComplete:
		e.key(*c.Key)
		e.str(c.Fingerprint)
		return e.result(*c.Result)
	case TypeCancel:
		e.str(c.ExecutionID)
		return e.result(*c.Result)
	case TypeResolve:
		e.str(c.ExecutionID)
		if err := e.result(c.Resolution.Result); err != nil {
			return err
		}
		e.bool(c.Resolution.AllowRunning)
		if c.Resolution.By != "" {
			// Written only when set: a resolve by nobody named ends
			// after AllowRunning.
			e.str(c.Resolution.By)
		}
	case TypeRelease:
		e.str(c.ExecutionID)
		e.bool(c.AllowRunning)
	case TypeDecide:
		d := c.Decision
		e.str(c.ExecutionID)
		e.str(string(d.Kind))
		e.str(d.Actor)
		e.str(d.Reason)
		e.time(d.At)
		e.str(d.NodeID)
	case TypeInterrupt, TypeNodeRemoved:
		e.str(c.NodeID)
	case TypeExpire, TypeAuditPrune:
		e.time(c.Cutoff)
	case TypeAdmin:
		e.str(c.Action)
		e.str(c.NodeID)
	case TypeAuditCheckpoint:
		s := c.Checkpoint
		e.uint(s.Seq)
		e.str(s.Hash)
		e.str(s.Signature)
		e.str(s.KeyID)
	case TypeCapacity:
		e.int(int64(c.Capacity))
		e.int(c.MaxBytes)
	case TypeNode:
		n := c.Node
		e.str(n.ID)
		e.str(n.RaftAddr)
		e.str(n.HTTPAddr)
		e.str(n.GossipAddr)
	}
	return nil
}

// errShort: a field runs past the end of the command.
var errShort = errors.New("truncated")

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

func (d *decoder) uint() uint64 {
	x, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(errShort)
		d.b = nil
		return 0
	}
	d.b = d.b[n:]
	return x
}

func (d *decoder) int() int64 {
	x, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(errShort)
		d.b = nil
		return 0
	}
	d.b = d.b[n:]
	return x
}

// bytes returns the next n bytes (a sub-slice of the command).
func (d *decoder) bytes(n uint64) []byte {
	if n > uint64(len(d.b)) {
		d.fail(errShort)
		d.b = nil
		return nil
	}
	out := d.b[:n:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) str() string { return string(d.bytes(d.uint())) }

func (d *decoder) bool() bool {
	b := d.bytes(1)
	if len(b) == 1 && b[0] > 1 {
		d.fail(fmt.Errorf("bool %d", b[0]))
	}
	return len(b) == 1 && b[0] == 1
}

func (d *decoder) time() time.Time {
	sec, nsec, off := d.int(), d.uint(), d.int()
	if nsec >= 1e9 || off <= -24*3600 || off >= 24*3600 {
		d.fail(fmt.Errorf("time %d.%d %+d out of range", sec, nsec, off))
		return time.Time{}
	}
	t := time.Unix(sec, int64(nsec)).UTC()
	if off != 0 {
		t = t.In(time.FixedZone("", int(off)))
	}
	// As the encoder, and JSON, which write the year in the time's zone.
	if y := t.Year(); y < 0 || y > 9999 {
		d.fail(fmt.Errorf("time %v outside years 0-9999", t))
		return time.Time{}
	}
	return t
}

// json reads a JSON payload: a copy, so that the record it becomes does
// not hold the whole log entry in memory. It is not checked here: the
// store checks a result's payloads (store.Result.Validate) before it
// records them, once, and refuses a command whose payload is not JSON.
func (d *decoder) json() json.RawMessage {
	n := d.uint()
	if n == 0 {
		return nil
	}
	b := d.bytes(n - 1)
	if b == nil {
		return nil
	}
	return append(json.RawMessage(nil), b...)
}

func (d *decoder) key() *store.Key {
	return &store.Key{Principal: d.str(), Session: d.str(), RequestID: d.str()}
}

func (d *decoder) result() store.Result {
	return store.Result{
		ExecutionID: d.str(), Status: store.Status(d.str()), Data: d.json(), Error: d.json(),
		FinishedAt: d.time(), ByteQuota: d.int(),
	}
}

// decodeBinary parses a binary command (data[0] is commandTag).
func decodeBinary(data []byte) (Command, error) {
	if len(data) < 2 || int(data[1]) >= len(codeTypes) || codeTypes[data[1]] == "" {
		return Command{}, fmt.Errorf("%w: unknown binary command type", ErrMalformed)
	}
	c := Command{Type: codeTypes[data[1]]}
	d := decoder{b: data[2:]}
	c.At = d.time()
	c.Actor = d.str()
	switch c.Type {
	case TypeReserve:
		c.Key = d.key()
		c.Fingerprint = d.str()
		c.Execution = &store.Execution{
			ID: d.str(), Tool: d.str(), NodeID: d.str(), StartedAt: d.time(),
			Quota: int(d.int()), ByteQuota: d.int(), Headroom: d.int(), DedupeWindow: time.Duration(d.int()),
		}
		if d.err == nil && len(d.b) > 0 {
			c.Execution.RetryUncertain = d.bool()
			if d.err == nil && len(d.b) > 0 {
				c.Execution.Approval = d.gate()
			} else if d.err == nil && !c.Execution.RetryUncertain {
				// Written false only before a gate: one encoding per
				// command.
				d.fail(errors.New("retry_uncertain written false"))
			}
		}
	case TypeComplete:
		c.Key = d.key()
		c.Fingerprint = d.str()
		r := d.result()
		c.Result = &r
	case TypeCancel:
		c.ExecutionID = d.str()
		r := d.result()
		c.Result = &r
	case TypeResolve:
		c.ExecutionID = d.str()
		c.Resolution = &store.Resolution{Result: d.result(), AllowRunning: d.bool()}
		if d.err == nil && len(d.b) > 0 {
			c.Resolution.By = d.str()
		}
	case TypeRelease:
		c.ExecutionID = d.str()
		c.AllowRunning = d.bool()
	case TypeDecide:
		c.ExecutionID = d.str()
		c.Decision = &store.Decision{Kind: store.DecisionKind(d.str()), Actor: d.str(), Reason: d.str(), At: d.time(), NodeID: d.str()}
	case TypeInterrupt, TypeNodeRemoved:
		c.NodeID = d.str()
	case TypeExpire, TypeAuditPrune:
		c.Cutoff = d.time()
	case TypeAdmin:
		c.Action = d.str()
		c.NodeID = d.str()
	case TypeAuditCheckpoint:
		c.Checkpoint = &audit.Signed{Seq: d.uint(), Hash: d.str(), Signature: d.str(), KeyID: d.str()}
	case TypeCapacity:
		c.Capacity = int(d.int())
		c.MaxBytes = d.int()
	case TypeNode:
		c.Node = &NodeInfo{ID: d.str(), RaftAddr: d.str(), HTTPAddr: d.str(), GossipAddr: d.str()}
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail(fmt.Errorf("%d bytes after the payload", len(d.b)))
	}
	if d.err != nil {
		return Command{}, fmt.Errorf("%w: %s: %w", ErrMalformed, c.Type, d.err)
	}
	if err := c.check(); err != nil {
		return Command{}, fmt.Errorf("%w: %s: %w", ErrMalformed, c.Type, err)
	}
	return c, nil
}
