package otlp

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// contentTypeProtobuf is the media type of OTLP/HTTP's binary protobuf.
const contentTypeProtobuf = "application/x-protobuf"

// Field numbers of ExportTraceServiceResponse, its
// ExportTracePartialSuccess, and google.rpc.Status (a refusal's body).
const (
	responsePartialSuccess protowire.Number = 1
	partialRejectedSpans   protowire.Number = 1
	partialErrorMessage    protowire.Number = 2
	rpcStatusMessage       protowire.Number = 2
)

// maxMessage bounds the receiver's text quoted in an error.
const maxMessage = 256

// partialSuccess reads an ExportTraceServiceResponse: nil when it reports
// no partial success (no rejected span, no message), else an error that
// says how many spans the receiver rejected and why.
func partialSuccess(answer []byte) error {
	body, ok := field(answer, responsePartialSuccess)
	if !ok {
		return nil
	}
	var rejected uint64
	var message string
	for b := body; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errors.New("the receiver's answer is not an ExportTraceServiceResponse")
		}
		b = b[n:]
		switch {
		case num == partialRejectedSpans && typ == protowire.VarintType:
			rejected, n = protowire.ConsumeVarint(b)
		case num == partialErrorMessage && typ == protowire.BytesType:
			var s []byte
			s, n = protowire.ConsumeBytes(b)
			message = string(s)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return errors.New("the receiver's answer is not an ExportTraceServiceResponse")
		}
		b = b[n:]
	}
	if rejected == 0 && message == "" {
		return nil
	}
	return fmt.Errorf("the receiver rejected %d spans%s", int64(rejected), msg(clip(message)))
}

// errorMessage is what the body of a refusal says: the message of a
// google.rpc.Status when it is protobuf, else its text, clipped.
func errorMessage(answer []byte, protobuf bool) string {
	if protobuf {
		m, _ := field(answer, rpcStatusMessage)
		return clip(string(m))
	}
	return clip(strings.TrimSpace(string(answer)))
}

// field returns the last length-delimited field num of message b.
func field(b []byte, num protowire.Number) (value []byte, found bool) {
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return value, found
		}
		b = b[l:]
		if n == num && typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return value, found
			}
			value, found = v, true
			b = b[l:]
			continue
		}
		if l = protowire.ConsumeFieldValue(n, typ, b); l < 0 {
			return value, found
		}
		b = b[l:]
	}
	return value, found
}

// clip cuts s to maxMessage bytes of valid UTF-8.
func clip(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "?")
	}
	if len(s) <= maxMessage {
		return s
	}
	s = s[:maxMessage]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
