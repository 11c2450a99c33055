package fsm

import (
	"errors"
	"fmt"

	"github.com/carmyhq/carmy/store"
)

// responseTag opens a Response in its binary form; a later form would
// take another tag, so that a node reading one it does not know fails
// rather than misreads it.
const responseTag byte = 1

// AppendResponse appends the binary form of r to b, for the node-to-node
// wire: a tag byte, then the fields in a fixed order, each as the command
// codec writes it (uvarint-prefixed strings, varints, the record as a
// snapshot holds it). On error (a time no JSON could carry either) it
// returns b unchanged.
func AppendResponse(b []byte, r Response) ([]byte, error) {
	e := encoder{b: append(b, responseTag)}
	e.int(int64(r.Outcome))
	_ = e.record(&r.Record)
	e.int(int64(r.Count))
	e.str(string(r.Code))
	e.str(r.Message)
	e.str(r.Op)
	e.str(r.Principal)
	e.int(int64(r.Quota))
	e.int(r.Bytes)
	e.str(r.Resource)
	e.int(r.Limit)
	// Last, and only for a gated record: a response without one reads
	// as before gates existed.
	e.approval(&r.Record)
	if e.err != nil {
		return b, fmt.Errorf("fsm: encoding a response: %w", e.err)
	}
	return e.b, nil
}

// DecodeResponse reads a Response that AppendResponse wrote, all of data
// and nothing more. The record's data and error are copies, checked to be
// JSON, as a snapshot's are; anything else malformed (short, trailing
// bytes, an unknown tag) is an error, never a panic.
func DecodeResponse(data []byte) (Response, error) {
	if len(data) == 0 || data[0] != responseTag {
		return Response{}, errors.New("fsm: not a response in binary form")
	}
	d := decoder{b: data[1:]}
	var r Response
	r.Outcome = store.Outcome(d.int())
	r.Record = d.record()
	r.Count = int(d.int())
	r.Code = store.Code(d.str())
	r.Message = d.str()
	r.Op = d.str()
	r.Principal = d.str()
	r.Quota = int(d.int())
	r.Bytes = d.int()
	r.Resource = d.str()
	r.Limit = d.int()
	d.approval(&r.Record)
	if d.err == nil && len(d.b) > 0 {
		d.fail(fmt.Errorf("%d bytes after the response", len(d.b)))
	}
	if d.err != nil {
		return Response{}, fmt.Errorf("fsm: decoding a response: %w", d.err)
	}
	return r, nil
}
