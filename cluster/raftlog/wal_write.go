package raftlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	metrics "github.com/hashicorp/go-metrics"
	"github.com/hashicorp/raft"
)

// StoreLog implements raft.LogStore.
func (w *WAL) StoreLog(l *raft.Log) error { return w.StoreLogs([]*raft.Log{l}) }

// StoreLogs implements raft.LogStore: the entries, which must follow the
// log's last or leave a gap after it (then what was before is deleted:
// Raft leaves a gap only after a snapshot), are durable when it returns (one fdatasync; a new segment
// adds a sync of the directory). On failure the log is as it was.
func (w *WAL) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	start := time.Now()
	w.writeMu.Lock()
	defer w.writeMu.Unlock()
	if w.broken != nil {
		return w.broken
	}
	w.mu.RLock()
	last, first, n := w.lastIndex(), w.first, len(w.segs)
	var tail *segment
	if n > 0 {
		tail = w.segs[n-1]
	}
	w.mu.RUnlock()
	if n > 0 && logs[0].Index > last+1 {
		// A gap: Raft, which may leave one after a snapshot installed
		// when it did not empty the log, reads nothing before the
		// snapshot again. The log is emptied, as Raft would have.
		if err := w.deleteFront(logs[0].Index); err != nil {
			return fmt.Errorf("cluster: raft log: emptying the log before entry %d: %w", logs[0].Index, err)
		}
		n, tail = 0, nil
	}
	for i, l := range logs {
		if (n > 0 || i > 0) && l.Index != last+1 {
			return fmt.Errorf("cluster: raft log: entry %d appended after %d", l.Index, last)
		}
		last = l.Index
	}
	if n == 0 && logs[0].Index < first {
		// An emptied log taking entries below its old front (after a
		// snapshot restore): they must not read as deleted.
		if err := w.writeFirst(logs[0].Index); err != nil {
			return fmt.Errorf("cluster: raft log: %w", err)
		}
	}

	// The records are laid out in the buffer kept from the last append
	// (writeMu is held: no other append uses it meanwhile).
	size := 0
	for _, l := range logs {
		size += recordSize(l)
	}
	buf := w.scratch[:0]
	if cap(buf) < size {
		buf = make([]byte, 0, size)
	}
	if cap(buf) <= maxScratch {
		w.scratch = buf
	}
	offsets := make([]int64, len(logs))
	for i, l := range logs {
		offsets[i] = int64(len(buf))
		buf = appendRecord(buf, l)
	}
	if tail == nil || tail.size >= w.segmentSize {
		if err := w.appendSegment(logs[0].Index, buf, offsets); err != nil {
			return err
		}
		if tail != nil && tail.reserved > tail.size {
			// Best effort: zeros left past a segment that is not the
			// last are read as its end (openSegment).
			if tail.f.Truncate(tail.size) == nil {
				tail.filled = tail.size
			}
			release(tail.f, tail.size, tail.reserved-tail.size)
			tail.reserved = tail.size
		}
		measureAppend(start, len(logs))
		return nil
	}
	if _, err := tail.f.WriteAt(buf, tail.size); err != nil {
		return w.undo(tail, fmt.Errorf("cluster: appending raft log entries %d–%d to %s: %w", logs[0].Index, last, tail.f.Name(), err))
	}
	if err := fdatasync(tail.f); err != nil {
		return w.undo(tail, fmt.Errorf("cluster: syncing raft log entries %d–%d to %s: %w", logs[0].Index, last, tail.f.Name(), err))
	}
	w.mu.Lock()
	for _, o := range offsets {
		tail.offsets = append(tail.offsets, tail.size+o)
	}
	tail.size += int64(len(buf))
	tail.filled = max(tail.filled, tail.size)
	tail.reserved = max(tail.reserved, tail.filled)
	w.mu.Unlock()
	measureAppend(start, len(logs))
	return nil
}

// measureAppend reports an append of n entries begun at start through
// go-metrics, as raft-boltdb reports its own (carmy_raft_wal_storeLogs,
// carmy_raft_wal_logsPerBatch).
func measureAppend(start time.Time, n int) {
	metrics.MeasureSince([]string{"raft", "wal", "storeLogs"}, start)
	metrics.AddSample([]string{"raft", "wal", "logsPerBatch"}, float32(n))
}

// undo cuts tail back to its end before a failed write, and returns err;
// if it cannot, the WAL is broken.
func (w *WAL) undo(tail *segment, err error) error {
	if terr := tail.f.Truncate(tail.size); terr != nil {
		w.broken = fmt.Errorf("%w; and cutting off the partial write failed, so the log takes no more writes: %w", err, terr)
		return w.broken
	}
	// The cut took the zeros written ahead and the room reserved too.
	tail.filled, tail.reserved = tail.size, tail.size
	return err
}

// appendSegment writes buf, the records of the entries from first on,
// to a new segment file, synced with its directory.
func (w *WAL) appendSegment(first uint64, buf []byte, offsets []int64) error {
	path := filepath.Join(w.dir, segName(first))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o600)
	if err == nil {
		_, err = f.Write(buf)
		if err == nil {
			err = fdatasync(f)
		}
		if err == nil {
			err = syncDir(w.dir)
		}
		if err != nil {
			f.Close()
			os.Remove(path)
		}
	}
	if err != nil {
		return fmt.Errorf("cluster: appending raft log entries from %d to a new segment %s: %w", first, path, err)
	}
	w.mu.Lock()
	w.segs = append(w.segs, &segment{first: first, f: f, offsets: offsets, size: int64(len(buf)), filled: int64(len(buf)), reserved: int64(len(buf))})
	w.mu.Unlock()
	return nil
}

// DeleteRange implements raft.LogStore, for a range at the front of the
// log (entries Raft compacted into a snapshot, or the whole log) or at its
// end (a follower's entries that conflict with its leader's).
func (w *WAL) DeleteRange(lo, hi uint64) error {
	w.writeMu.Lock()
	defer w.writeMu.Unlock()
	if w.broken != nil {
		return w.broken
	}
	w.mu.RLock()
	first, last := w.firstIndex(), w.lastIndex()
	w.mu.RUnlock()
	var err error
	switch {
	case lo > hi || len(w.segs) == 0 || hi < first || lo > last:
		return nil
	case lo <= first:
		err = w.deleteFront(hi + 1)
	case hi >= last:
		err = w.deleteBack(lo)
	default:
		return fmt.Errorf("cluster: raft log: cannot delete entries %d–%d from the middle of %d–%d", lo, hi, first, last)
	}
	if err != nil {
		return fmt.Errorf("cluster: deleting raft log entries %d–%d in %s: %w", lo, hi, w.dir, err)
	}
	return nil
}

// deleteFront deletes every entry below first: "first" is written (and
// from then on the entries are gone, whatever a crash leaves), then the
// segments wholly below it are removed.
func (w *WAL) deleteFront(first uint64) error {
	if err := w.writeFirst(first); err != nil {
		return err
	}
	w.mu.Lock()
	var gone []*segment
	for len(w.segs) > 0 && w.segs[0].last() < first {
		gone = append(gone, w.segs[0])
		w.segs = w.segs[1:]
	}
	w.mu.Unlock()
	if err := w.remove(gone); err != nil {
		w.broken = fmt.Errorf("cluster: raft log %s: removing deleted segments failed, so the log takes no more writes: %w", w.dir, err)
		return w.broken
	}
	return nil
}

// deleteBack deletes every entry from lo on: the later segments first
// (highest first, so that a crash leaves no gap), then the one holding lo
// is cut at lo's record.
func (w *WAL) deleteBack(lo uint64) error {
	if err := w.cutBack(lo); err != nil {
		w.broken = fmt.Errorf("cluster: raft log %s: deleting entries from %d on failed, so the log takes no more writes: %w", w.dir, lo, err)
		return w.broken
	}
	return nil
}

// cutBack is deleteBack's work.
func (w *WAL) cutBack(lo uint64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var gone []*segment
	for len(w.segs) > 0 && w.segs[len(w.segs)-1].first >= lo {
		gone = append(gone, w.segs[len(w.segs)-1])
		w.segs = w.segs[:len(w.segs)-1]
	}
	if err := w.remove(gone); err != nil {
		return err
	}
	if len(w.segs) == 0 {
		return nil
	}
	s := w.segs[len(w.segs)-1]
	if s.last() < lo {
		return nil
	}
	end := s.offsets[lo-s.first]
	if err := s.f.Truncate(end); err != nil {
		return err
	}
	if err := s.f.Sync(); err != nil {
		return err
	}
	s.offsets = s.offsets[:lo-s.first]
	s.size, s.filled, s.reserved = end, end, end
	return nil
}

// remove closes and removes the segments' files, in the order given, and
// syncs the directory.
func (w *WAL) remove(segs []*segment) error {
	if len(segs) == 0 {
		return nil
	}
	for _, s := range segs {
		s.f.Close()
		if err := os.Remove(s.f.Name()); err != nil {
			return err
		}
	}
	return syncDir(w.dir)
}

// The margin: the room the WAL keeps reserved past the end of its last
// segment (EnsureMargin), topped up walMarginStep at a time, and the
// zeros it keeps written ahead there: when fewer than walFillAhead bytes
// of them lie past the last record, the reserved room is written up to
// WALMargin past it, so that zeros are written and synced about once for
// every 768 KiB of entries.
const (
	WALMargin     = 1 << 20
	walMarginStep = 64 << 10
	walFillAhead  = 256 << 10
)

// EnsureMargin reserves the blocks of the WALMargin bytes past the end of
// the last segment, if they are not yet, and returns the error (a full
// disk) when it cannot. The entries written while it fails go to the
// margin: a node that stops taking new calls when it fails (QueuedLog's
// space check) still has room for the entries already on their way, such
// as the outcome of a tool that ran. A file system that cannot reserve
// blocks keeps no margin but the zeros written ahead.
//
// It also writes zeros ahead into the reserved room (see WAL: written
// ahead), synced, so that appends overwrite blocks the file has. A write
// of zeros that fails takes back what it wrote, and its error is
// returned.
func (w *WAL) EnsureMargin() error {
	w.writeMu.Lock()
	defer w.writeMu.Unlock()
	w.mu.RLock()
	var tail *segment
	if n := len(w.segs); n > 0 && w.broken == nil {
		tail = w.segs[n-1]
	}
	w.mu.RUnlock()
	if tail == nil {
		return nil
	}
	if tail.reserved < tail.size+WALMargin {
		end := tail.size + WALMargin + walMarginStep
		if err := allocate(tail.f, tail.reserved, end-tail.reserved); err != nil {
			return fmt.Errorf("cluster: reserving %d KiB past the end of the raft log's %s: %w", WALMargin>>10, tail.f.Name(), err)
		}
		tail.reserved = end
	}
	if tail.filled < tail.size+walFillAhead {
		end := tail.size + WALMargin
		if err := fillZeros(tail.f, tail.filled, end); err != nil {
			// Cutting the file back gives back the room reserved past
			// it too.
			if terr := tail.f.Truncate(tail.filled); terr != nil {
				err = errors.Join(err, terr)
			}
			tail.reserved = tail.filled
			return fmt.Errorf("cluster: writing zeros ahead past the end of the raft log's %s: %w", tail.f.Name(), err)
		}
		tail.filled = end
		tail.reserved = max(tail.reserved, end)
	}
	return nil
}

// zeroBlock is what fillZeros writes, a block at a time.
var zeroBlock = make([]byte, 64<<10)

// fillZeros writes zeros to f's bytes [from, to) and syncs them.
func fillZeros(f *os.File, from, to int64) error {
	for off := from; off < to; {
		n := min(int64(len(zeroBlock)), to-off)
		if _, err := f.WriteAt(zeroBlock[:n], off); err != nil {
			return err
		}
		off += n
	}
	return fdatasync(f)
}
