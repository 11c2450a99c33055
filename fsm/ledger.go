package fsm

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/carmyhq/carmy/store/audit"
)

// Ledger is a node's audit ledger on disk (audit.db in its data dir): the
// entries the FSM drafts as it applies the log, chained (package audit)
// and written in BoltDB transactions, each with the last Raft index its
// entries came from, by a writer of its own (ledger_queue.go). An
// entry is kept as its export line, so exporting re-encodes nothing.
//
// Crash consistency: Raft replays the log after its last snapshot into
// the FSM after a restart; the ledger skips every log entry at or below
// the index it holds, so a replay never appends an entry twice. A
// snapshot carries the ledger (snapshot_binary.go), so a node that
// installs one ends with the same chain.
//
// A write that fails (an I/O error, a full disk) leaves the ledger behind
// the log: the error is kept (Err), no later write is tried, and the FSM
// refuses to snapshot, so Raft keeps the log the ledger still needs and a
// restart writes it again.
//
// The FSM queues its entries from Raft's apply goroutine; the read
// methods may be called concurrently from any goroutine, and see what is
// written (Flush waits for what is queued).
type Ledger struct {
	db *bbolt.DB

	mu         sync.RWMutex
	head       audit.Head // the last entry, or checkpoint when none is left
	checkpoint audit.Head // the last pruned entry (audit.Start: none)
	index      uint64     // the last log index written
	err        error

	// The writer's: it chains the entries, and lays out a commit's values
	// in values (kept for the next commit up to maxKeptValues bytes).
	chain  audit.Chainer
	values []byte
	q      ledgerQueue
}

var (
	bucketEntries = []byte("entries") // seq (8 bytes, big endian) → time (8 bytes, Unix ns) ‖ line
	bucketMeta    = []byte("meta")
	keyIndex      = []byte("index")      // 8 bytes
	keyHead       = []byte("head")       // seq (8 bytes) ‖ hash
	keyCheckpoint = []byte("checkpoint") // seq (8 bytes) ‖ hash
)

// OpenLedger opens (or creates) the ledger file at path.
func OpenLedger(path string) (*Ledger, error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{
		Timeout: time.Second, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType,
		// A snapshot streams the ledger from a read transaction while
		// the FSM goes on writing; a file that must grow its mapping
		// waits for such readers. Mapping ahead avoids that wait until
		// the file passes this size (it costs address space, not memory).
		InitialMmapSize: 1 << 30,
	})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("fsm: %s is locked by another process: is another carmy serving this data dir? (%w)", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("fsm: opening the audit ledger %s: %w", path, err)
	}
	l := &Ledger{db: db, head: audit.Start, checkpoint: audit.Start}
	err = db.Update(func(tx *bbolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(bucketEntries); err != nil {
			return err
		}
		m, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		l.index = getUint(m.Get(keyIndex))
		l.head = getHead(m.Get(keyHead), audit.Start)
		l.checkpoint = getHead(m.Get(keyCheckpoint), audit.Start)
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("fsm: opening the audit ledger %s: %w", path, err)
	}
	l.start()
	return l, nil
}

// Close closes the file.
// Close writes what is queued, stops the writer and closes the file.
func (l *Ledger) Close() error {
	l.stop()
	return l.db.Close()
}

// Head returns the last entry's {seq, hash} (the checkpoint's when every
// entry was pruned; audit.Start when there has been none).
func (l *Ledger) Head() audit.Head {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.head
}

// Checkpoint returns the {seq, hash} of the last pruned entry
// (audit.Start when none was pruned).
func (l *Ledger) Checkpoint() audit.Head {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.checkpoint
}

// Index returns the last Raft log index whose entries are written.
func (l *Ledger) Index() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.index
}

// Err returns the error that stopped the ledger's writes, if any.
func (l *Ledger) Err() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.err
}

// Oldest returns the time of the oldest entry kept, and false when there
// is none.
func (l *Ledger) Oldest() (time.Time, bool) {
	var t time.Time
	ok := false
	_ = l.db.View(func(tx *bbolt.Tx) error {
		if _, v := tx.Bucket(bucketEntries).Cursor().First(); len(v) >= 8 {
			t, ok = time.Unix(0, int64(binary.BigEndian.Uint64(v))).UTC(), true
		}
		return nil
	})
	return t, ok
}

// ledgerGroup is what one applied log entry gives the ledger.
type ledgerGroup struct {
	index  uint64
	drafts []audit.Draft
	prune  time.Time // zero: none
}

// maxKeptValues bounds the bytes of values the writer keeps between
// commits: a loaded node's commit of 100 ms holds some 700 entries of
// about 500 bytes.
const maxKeptValues = 1 << 20

// write appends groups, in order, in one transaction, skipping those at
// or below the index already written.
func (l *Ledger) write(groups []ledgerGroup) {
	l.mu.RLock()
	head, cp, index, failed := l.head, l.checkpoint, l.index, l.err != nil
	l.mu.RUnlock()
	if failed {
		return
	}
	for len(groups) > 0 && groups[0].index <= index {
		groups = groups[1:]
	}
	if len(groups) == 0 {
		return
	}
	values := l.values[:0]
	err := l.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketEntries)
		// Keys only grow, so a page split off the end is never written
		// into again: fill it whole instead of half (bbolt's default),
		// which halves the pages a commit writes and the file's size.
		b.FillPercent = 1
		var key [8]byte
		for _, g := range groups {
			for _, d := range g.drafts {
				// A value must stay as it is until the transaction ends:
				// values only grows meanwhile (a larger array when it
				// must, leaving the values put before where they are).
				start := len(values)
				values = binary.BigEndian.AppendUint64(values, uint64(d.Time.UnixNano()))
				var e audit.Entry
				values, e, head = l.chain.AppendNext(values, head, d)
				binary.BigEndian.PutUint64(key[:], e.Seq)
				if err := b.Put(key[:], values[start:len(values):len(values)]); err != nil {
					return err
				}
			}
			if !g.prune.IsZero() {
				var err error
				if cp, err = prune(b, g.prune, cp); err != nil {
					return err
				}
			}
		}
		m := tx.Bucket(bucketMeta)
		index = groups[len(groups)-1].index
		return errors.Join(m.Put(keyIndex, binary.BigEndian.AppendUint64(nil, index)),
			m.Put(keyHead, putHead(head)), m.Put(keyCheckpoint, putHead(cp)))
	})
	if cap(values) <= maxKeptValues {
		l.values = values[:0]
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.err = fmt.Errorf("fsm: writing the audit ledger at index %d: %w", groups[0].index, err)
		return
	}
	l.head, l.checkpoint, l.index = head, cp, index
}

// prune deletes the entries from the first on whose time is before
// cutoff, and returns the new checkpoint: the last one deleted.
func prune(b *bbolt.Bucket, cutoff time.Time, cp audit.Head) (audit.Head, error) {
	c := b.Cursor()
	var dead [][]byte
	for k, v := c.First(); k != nil && len(v) > 8; k, v = c.Next() {
		if int64(binary.BigEndian.Uint64(v)) >= cutoff.UnixNano() {
			break
		}
		e, err := decodeStored(v)
		if err != nil {
			return cp, err
		}
		cp = audit.Head{Seq: e.Seq, Hash: e.Hash}
		dead = append(dead, k)
	}
	for _, k := range dead {
		if err := b.Delete(k); err != nil {
			return cp, err
		}
	}
	return cp, nil
}

// decodeStored reads the entry of a stored value (time ‖ line).
func decodeStored(v []byte) (audit.Entry, error) {
	var e audit.Entry
	if len(v) < 8 {
		return e, errors.New("fsm: audit ledger: a short value")
	}
	if err := json.Unmarshal(v[8:], &e); err != nil {
		return e, fmt.Errorf("fsm: audit ledger: %w", err)
	}
	return e, nil
}

// Entry returns the written entry of seq; ok is false when the ledger
// holds none of that seq (not yet written, or pruned).
func (l *Ledger) Entry(seq uint64) (e audit.Entry, ok bool, err error) {
	tx, err := l.db.Begin(false)
	if err != nil {
		return e, false, fmt.Errorf("fsm: audit ledger: %w", err)
	}
	defer tx.Rollback()
	var key [8]byte
	binary.BigEndian.PutUint64(key[:], seq)
	v := tx.Bucket(bucketEntries).Get(key[:])
	if v == nil {
		return e, false, nil
	}
	e, err = decodeStored(v)
	return e, err == nil, err
}

// MaxExportLimit bounds the entries of one Export.
const MaxExportLimit = 10000

// Export writes to w up to limit entries after seq after, as export lines
// (audit.Entry.Line), preceded by a checkpoint line (audit.CheckpointLine)
// naming the {seq, hash} the first entry follows, unless it is the first
// entry of the chain. An after below the checkpoint starts from the
// checkpoint (the entries before it are pruned). It returns the seq of
// the last entry written (the checkpoint's when none was).
func (l *Ledger) Export(w io.Writer, after uint64, limit int) (uint64, error) {
	limit = min(max(limit, 1), MaxExportLimit)
	tx, err := l.db.Begin(false)
	if err != nil {
		return 0, fmt.Errorf("fsm: audit ledger: %w", err)
	}
	defer tx.Rollback()
	cp := getHead(tx.Bucket(bucketMeta).Get(keyCheckpoint), audit.Start)
	b := tx.Bucket(bucketEntries)
	var key [8]byte
	anchor := cp
	if after > cp.Seq {
		binary.BigEndian.PutUint64(key[:], after)
		v := b.Get(key[:])
		if v == nil {
			return after, nil // past the head: nothing yet
		}
		e, err := decodeStored(v)
		if err != nil {
			return 0, err
		}
		anchor = audit.Head{Seq: e.Seq, Hash: e.Hash}
	}
	var buf []byte
	if anchor.Seq > 0 {
		buf = audit.CheckpointLine(buf, anchor)
	}
	last := anchor.Seq
	binary.BigEndian.PutUint64(key[:], anchor.Seq+1)
	c := b.Cursor()
	for k, v := c.Seek(key[:]); k != nil && limit > 0; k, v = c.Next() {
		buf = append(buf, v[8:]...)
		last = binary.BigEndian.Uint64(k)
		limit--
		if len(buf) >= 64<<10 {
			if _, err := w.Write(buf); err != nil {
				return last, err
			}
			buf = buf[:0]
		}
	}
	_, err = w.Write(buf)
	return last, err
}

func getUint(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

func getHead(b []byte, def audit.Head) audit.Head {
	if len(b) < 8 {
		return def
	}
	return audit.Head{Seq: binary.BigEndian.Uint64(b), Hash: string(b[8:])}
}

func putHead(h audit.Head) []byte {
	return append(binary.BigEndian.AppendUint64(nil, h.Seq), h.Hash...)
}

// hashAt returns the hash of the entry seq (the checkpoint's, or
// audit.Genesis for 0), and whether the ledger holds it.
func hashAt(tx *bbolt.Tx, seq uint64) (string, bool) {
	cp := getHead(tx.Bucket(bucketMeta).Get(keyCheckpoint), audit.Start)
	if seq == cp.Seq {
		return cp.Hash, true
	}
	var key [8]byte
	binary.BigEndian.PutUint64(key[:], seq)
	v := tx.Bucket(bucketEntries).Get(key[:])
	if v == nil {
		return "", false
	}
	e, err := decodeStored(v)
	return e.Hash, err == nil
}

// ledgerView is the ledger as a snapshot captured it: a read transaction
// that the snapshot streams from while the FSM goes on writing.
type ledgerView struct {
	tx       *bbolt.Tx
	cp, head audit.Head
}

// view opens a ledgerView at the ledger's current state. The FSM calls it
// on Raft's apply goroutine, between writes.
func (l *Ledger) view() (*ledgerView, error) {
	l.Flush()
	if err := l.Err(); err != nil {
		return nil, err
	}
	tx, err := l.db.Begin(false)
	if err != nil {
		return nil, fmt.Errorf("fsm: audit ledger: %w", err)
	}
	m := tx.Bucket(bucketMeta)
	return &ledgerView{tx: tx, cp: getHead(m.Get(keyCheckpoint), audit.Start), head: getHead(m.Get(keyHead), audit.Start)}, nil
}

// each calls fn with every stored value (time ‖ line) in seq order.
func (v *ledgerView) each(fn func(val []byte) error) error {
	c := v.tx.Bucket(bucketEntries).Cursor()
	for k, val := c.First(); k != nil; k, val = c.Next() {
		if err := fn(val); err != nil {
			return err
		}
	}
	return nil
}

// release ends the view's transaction.
func (v *ledgerView) release() {
	if v != nil && v.tx != nil {
		_ = v.tx.Rollback()
		v.tx = nil
	}
}

// restoreChunk is how many entries one transaction of a restore writes.
const restoreChunk = 4096

// restore makes the ledger the snapshot's (checkpoint cp, head, then the
// entries next returns, head.Seq-cp.Seq of them) as of log index. When
// the ledger already holds the snapshot's head and an index at or past
// index (a restart restoring its own latest snapshot), it keeps its own
// entries, which go further, and next is only read through. Otherwise
// its entries are replaced; the index is written last, so a restore cut
// short by a crash is done again when Raft restores the snapshot on the
// next start. Each entry read must follow the one before.
func (l *Ledger) restore(index uint64, cp, head audit.Head, next func() ([]byte, error)) error {
	l.Flush()
	count := head.Seq - cp.Seq
	keep := false
	if l.Index() >= index {
		_ = l.db.View(func(tx *bbolt.Tx) error {
			h, ok := hashAt(tx, head.Seq)
			keep = ok && h == head.Hash
			return nil
		})
	}
	if keep {
		for ; count > 0; count-- {
			if _, err := next(); err != nil {
				return err
			}
		}
		return nil
	}
	err := l.db.Update(func(tx *bbolt.Tx) error {
		if err := tx.DeleteBucket(bucketEntries); err != nil && !errors.Is(err, bolterrors.ErrBucketNotFound) {
			return err
		}
		if _, err := tx.CreateBucket(bucketEntries); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keyIndex, binary.BigEndian.AppendUint64(nil, 0))
	})
	if err != nil {
		return fmt.Errorf("fsm: restoring the audit ledger: %w", err)
	}
	prev := cp
	for count > 0 {
		err := l.db.Update(func(tx *bbolt.Tx) error {
			b := tx.Bucket(bucketEntries)
			for n := 0; n < restoreChunk && count > 0; n, count = n+1, count-1 {
				val, err := next()
				if err != nil {
					return err
				}
				e, err := decodeStored(val)
				if err != nil {
					return err
				}
				if e.Seq != prev.Seq+1 || e.PrevHash != prev.Hash {
					return fmt.Errorf("entry %d does not follow %d", e.Seq, prev.Seq)
				}
				prev = audit.Head{Seq: e.Seq, Hash: e.Hash}
				if err := b.Put(binary.BigEndian.AppendUint64(nil, e.Seq), bytes.Clone(val)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("fsm: restoring the audit ledger: %w", err)
		}
	}
	if prev != head {
		return fmt.Errorf("fsm: restoring the audit ledger: the entries end at %d, the snapshot's head is %d", prev.Seq, head.Seq)
	}
	err = l.db.Update(func(tx *bbolt.Tx) error {
		m := tx.Bucket(bucketMeta)
		return errors.Join(m.Put(keyHead, putHead(head)), m.Put(keyCheckpoint, putHead(cp)),
			m.Put(keyIndex, binary.BigEndian.AppendUint64(nil, index)))
	})
	if err != nil {
		return fmt.Errorf("fsm: restoring the audit ledger: %w", err)
	}
	l.mu.Lock()
	l.head, l.checkpoint, l.index, l.err = head, cp, index, nil
	l.mu.Unlock()
	return nil
}
