// Package iobuf reads into buffers the caller sizes, so that a body whose
// size is known ahead is read in one allocation of that size rather than
// grown as io.ReadAll grows its own.
package iobuf

import "io"

// ReadAppend appends what r gives to dst until r ends (io.EOF, not
// returned as an error) or fails, or, when limit > 0, until dst holds
// limit bytes or more (it may hold up to one read more). dst's spare
// capacity is used first; it grows only when full. It returns the
// extended dst.
func ReadAppend(dst []byte, r io.Reader, limit int) ([]byte, error) {
	for limit <= 0 || len(dst) < limit {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
	return dst, nil
}
