package otlpread

import "google.golang.org/protobuf/encoding/protowire"

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
