package otlpread

import (
	"encoding/json"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
)

// EncodeResponse returns an ExportTraceServiceResponse in binary
// protobuf: empty (full success) when rejected is 0 and message "", else
// with its partial_success saying how many spans were rejected and why.
func EncodeResponse(rejected int64, message string) []byte {
	if rejected == 0 && message == "" {
		return []byte{}
	}
	var partial []byte
	if rejected != 0 {
		partial = protowire.AppendTag(partial, partialRejected, protowire.VarintType)
		partial = protowire.AppendVarint(partial, uint64(rejected))
	}
	if message != "" {
		partial = protowire.AppendTag(partial, partialMessage, protowire.BytesType)
		partial = protowire.AppendString(partial, message)
	}
	out := protowire.AppendTag(nil, responsePartial, protowire.BytesType)
	return protowire.AppendBytes(out, partial)
}

// EncodeResponseJSON returns the ExportTraceServiceResponse of
// EncodeResponse in OTLP/JSON: {} for a full success.
func EncodeResponseJSON(rejected int64, message string) []byte {
	if rejected == 0 && message == "" {
		return []byte("{}")
	}
	type partial struct {
		RejectedSpans string `json:"rejectedSpans,omitempty"`
		ErrorMessage  string `json:"errorMessage,omitempty"`
	}
	p := partial{ErrorMessage: message}
	if rejected != 0 {
		p.RejectedSpans = strconv.FormatInt(rejected, 10)
	}
	out, _ := json.Marshal(struct {
		PartialSuccess partial `json:"partialSuccess"`
	}{p}) // cannot fail: strings only
	return out
}
