package raftlog

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"time"

	"github.com/hashicorp/raft"
)

// A WAL record is one Raft log entry:
//
//	length   uint32  the payload's length
//	crc      uint32  CRC-32C of the payload
//	payload:
//	  index      uint64
//	  term       uint64
//	  type       uint8
//	  appendedAt int64   Unix nanoseconds; 0 for the zero time
//	  dataLen    uint32, data
//	  extLen     uint32, extensions
//
// all little-endian. A record cut short, or whose CRC does not match, is
// where a torn write ends the log (recoverSegment).
const (
	recordHeader  = 8
	payloadFixed  = 8 + 8 + 1 + 8 + 4 + 4
	maxRecordSize = 1 << 30 // far above any entry Raft writes (maxEntryBytes)
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// errTorn is a record that is not whole: the end of what was written.
var errTorn = errors.New("torn record")

// recordSize is the length of l's record, header included.
func recordSize(l *raft.Log) int {
	return recordHeader + payloadFixed + len(l.Data) + len(l.Extensions)
}

// appendRecord appends l's record to buf.
func appendRecord(buf []byte, l *raft.Log) []byte {
	n := recordSize(l) - recordHeader
	start := len(buf)
	buf = append(buf, make([]byte, recordHeader+n)...)
	p := buf[start+recordHeader:]
	binary.LittleEndian.PutUint64(p[0:], l.Index)
	binary.LittleEndian.PutUint64(p[8:], l.Term)
	p[16] = byte(l.Type)
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	binary.LittleEndian.PutUint64(p[17:], uint64(at))
	binary.LittleEndian.PutUint32(p[25:], uint32(len(l.Data)))
	copy(p[29:], l.Data)
	q := p[29+len(l.Data):]
	binary.LittleEndian.PutUint32(q, uint32(len(l.Extensions)))
	copy(q[4:], l.Extensions)
	binary.LittleEndian.PutUint32(buf[start:], uint32(n))
	binary.LittleEndian.PutUint32(buf[start+4:], crc32.Checksum(p, crcTable))
	return buf
}

// recordLen returns the whole length of the record whose header is h, or
// errTorn when the header cannot be one.
func recordLen(h []byte) (int, error) {
	if len(h) < recordHeader {
		return 0, errTorn
	}
	n := binary.LittleEndian.Uint32(h)
	if n < payloadFixed || n > maxRecordSize {
		return 0, errTorn
	}
	return recordHeader + int(n), nil
}

// decodeRecord decodes the whole record rec into l (its slices are
// copies), or returns errTorn when the record is not whole.
func decodeRecord(rec []byte, l *raft.Log) error {
	n, err := recordLen(rec)
	if err != nil || len(rec) < n {
		return errTorn
	}
	p := rec[recordHeader:n]
	if crc32.Checksum(p, crcTable) != binary.LittleEndian.Uint32(rec[4:]) {
		return errTorn
	}
	dl := int(binary.LittleEndian.Uint32(p[25:]))
	if 29+dl+4 > len(p) {
		return errTorn
	}
	el := int(binary.LittleEndian.Uint32(p[29+dl:]))
	if 29+dl+4+el != len(p) {
		return errTorn
	}
	*l = raft.Log{Index: binary.LittleEndian.Uint64(p[0:]), Term: binary.LittleEndian.Uint64(p[8:]), Type: raft.LogType(p[16])}
	if at := int64(binary.LittleEndian.Uint64(p[17:])); at != 0 {
		l.AppendedAt = time.Unix(0, at)
	}
	if dl > 0 {
		l.Data = append([]byte(nil), p[29:29+dl]...)
	}
	if el > 0 {
		l.Extensions = append([]byte(nil), p[33+dl:33+dl+el]...)
	}
	return nil
}
