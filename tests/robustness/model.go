package robustness

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"strings"

	"github.com/anishathalye/porcupine"
)

// The model is the sequential specification of one identity (docs/guarantees.md and
// docs/api.md#calling-a-tool-post-v1toolscall): a record that is vacant or held by one reservation, which runs,
// may be interrupted, finishes with one outcome that is then fixed, or is
// released when its tool never started, or, once interrupted, when the
// tool's reconcile probe finds that it never took effect (whether it did
// is the ledger's to check: checkProbes); an interrupted record whose
// effect the probe finds is completed with it, as if its runner had
// finished. Client operations observe the record; between them the
// record may move on by itself (internal transitions), which the step
// function allows before applying each op. The model is nondeterministic (an UNAVAILABLE or unanswered call may or
// may not have reserved; an unobserved outcome is fixed when first seen)
// and is made deterministic by porcupine's power-set construction.

// phase is where one identity's record stands.
type phase uint8

const (
	vacant phase = iota
	running
	interrupted
	final
)

func (p phase) String() string {
	return [...]string{"vacant", statusRunning, statusInterrupted, "final"}[p]
}

// noDeadline is state.finalBy for records no answer has forced to be final.
const noDeadline = math.MaxInt64

// state is the model's knowledge of one identity. The zero value is the
// vacant record; states are compared with ==, so every field is normalised
// (a final or vacant record carries no flags that no longer matter, only
// the released executions, which every later state keeps).
type state struct {
	phase      phase
	fp         string // fingerprint of the reserving call
	exec       string // execution id, "" until observed
	outKnown   bool   // the outcome is fixed: outStatus and outResult
	outStatus  string
	outResult  string
	releasable bool   // running, made by a call that did not see its tool start: its node may release it
	noRun      bool   // made by an UNAVAILABLE call: its tool never runs, so it never becomes final
	finalBy    int64  // every op called after this time sees the record final (the reserving answer returned its result then)
	lostBy     int64  // running, made by a call whose answer was lost: its runner marks it interrupted, and every op called after this time (the call's return) sees it so at least
	released   string // the observed execution ids of released reservations, each followed by ",": none may be seen again
}

// hash is consistent with ==: equal states have equal hashes.
func (s state) hash() uint64 {
	h := fnv.New64a()
	for _, f := range []string{s.fp, s.exec, s.outStatus, s.outResult, s.released} {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	h.Write([]byte{byte(s.phase), b2u(s.outKnown), b2u(s.releasable), b2u(s.noRun)})
	h.Write(binary.LittleEndian.AppendUint64(nil, uint64(s.finalBy)))
	h.Write(binary.LittleEndian.AppendUint64(nil, uint64(s.lostBy)))
	return h.Sum64()
}

func b2u(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// release is the reservation given up: the record is vacant again, and
// its execution, if observed, is never seen again.
func (s state) release() state {
	v := state{released: s.released}
	if s.exec != "" {
		v.released += s.exec + ","
	}
	return v
}

// wasReleased reports whether exec names a released reservation.
func (s state) wasReleased(exec string) bool {
	return exec != "" && strings.Contains(","+s.released, ","+exec+",")
}

// finish is the runner recording its outcome.
func (s state) finish() state {
	s.phase, s.releasable, s.finalBy = final, false, noDeadline
	return s
}

// transitions lists the states one internal transition reaches from s.
func (s state) transitions() []state {
	var next []state
	switch s.phase {
	case running:
		i := s
		i.phase, i.releasable, i.lostBy = interrupted, false, noDeadline
		if s.lostBy != noDeadline {
			// Its runner lost the answer: it records interrupted,
			// nothing else.
			return append(next, i)
		}
		if !s.noRun {
			next = append(next, s.finish())
		}
		next = append(next, i)
		if s.releasable {
			next = append(next, s.release())
		}
	case interrupted:
		if !s.noRun {
			next = append(next, s.finish())
		}
		if !s.outKnown {
			// The reconcile probe found no effect and released it
			// (docs/config.md#reconcile-probes): the identity is free, and the next call runs
			// the tool. A record some answer already returned the result
			// of has run, so no probe releases it.
			next = append(next, s.release())
		}
	}
	return next
}

// closure lists s and every state internal transitions reach from it,
// without duplicates.
func (s state) closure() []state {
	all := []state{s}
	for i := 0; i < len(all); i++ {
		for _, n := range all[i].transitions() {
			if !containsState(all, n) {
				all = append(all, n)
			}
		}
	}
	return all
}

func containsState(states []state, s state) bool {
	for _, x := range states {
		if x == s {
			return true
		}
	}
	return false
}

// step lists the states that may follow s once op has taken effect, with
// any internal transitions before it; none when op cannot happen in s.
func step(s state, op Op) []state {
	var next []state
	if op.Kind == KindUnavailable || op.Kind == KindUnknown {
		// Either nothing happened (later transitions are left to the
		// next op), or the call reserved a vacant record.
		next = append(next, s)
		for _, c := range s.closure() {
			if c.phase == vacant {
				next = append(next, state{phase: running, fp: op.Fingerprint, releasable: true,
					noRun: op.Kind == KindUnavailable, finalBy: noDeadline, lostBy: noDeadline, released: c.released})
				break
			}
		}
		return next
	}
	own := op.Kind == KindUncertain && op.Status == statusInterrupted
	for _, c := range s.closure() {
		if own && c.phase == vacant {
			// A lost answer (docs/guarantees.md): the call reserved, its request
			// reached the upstream, its runner marked the record
			// interrupted, and the call was answered so. Linearised at
			// the reservation, as a new call is: concurrent ops may
			// still see it running; from op.Return on it is interrupted
			// (or settled since).
			n := state{phase: running, fp: op.Fingerprint, exec: op.ExecutionID, finalBy: noDeadline, lostBy: op.Return, released: c.released}
			if !c.wasReleased(op.ExecutionID) && !containsState(next, n) {
				next = append(next, n)
			}
			continue
		}
		if (c.phase == running || c.phase == interrupted) && op.Call > c.finalBy {
			continue // an answer already returned this record's result
		}
		if c.phase == running && op.Call > c.lostBy {
			continue // the lost answer's return saw it interrupted
		}
		if n, ok := observe(c, op); ok && !containsState(next, n) {
			next = append(next, n)
		}
	}
	return next
}

// observe applies an answered op to s, without internal transitions.
func observe(s state, op Op) (state, bool) {
	if s.wasReleased(op.ExecutionID) {
		return s, false // an execution id names one reservation
	}
	if op.Kind == KindOK && !op.Replayed {
		if s.phase != vacant {
			return s, false
		}
		// Linearised at the reservation: concurrent ops may still see it
		// running; from op.Return on it is final with this outcome.
		return state{phase: running, fp: op.Fingerprint, exec: op.ExecutionID, outKnown: true,
			outStatus: op.Status, outResult: op.Result, finalBy: op.Return, lostBy: noDeadline, released: s.released}, true
	}
	if s.phase == vacant {
		return s, false
	}
	if op.ExecutionID != "" {
		if s.exec != "" && s.exec != op.ExecutionID {
			return s, false
		}
		s.exec = op.ExecutionID
	}
	switch op.Kind {
	case KindOK: // a replay
		if s.fp != op.Fingerprint || s.phase != final {
			return s, false
		}
		if s.outKnown && (s.outStatus != op.Status || s.outResult != op.Result) {
			return s, false
		}
		s.outKnown, s.outStatus, s.outResult = true, op.Status, op.Result
	case KindConflict:
		if s.fp == op.Fingerprint {
			return s, false
		}
	case KindUncertain:
		if s.fp != op.Fingerprint || s.phase.String() != op.Status {
			return s, false
		}
	default:
		return s, false
	}
	return s, true
}

// newModel returns the porcupine model of one identity. Its operations
// carry the whole Op as input and nil as output.
func newModel() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{state{}} },
		Step: func(s, in, _ any) []any {
			var out []any
			for _, n := range step(s.(state), in.(Op)) {
				out = append(out, n)
			}
			return out
		},
		Equal:             func(a, b any) bool { return a.(state) == b.(state) },
		Hash:              func(s any) uint64 { return s.(state).hash() },
		DescribeOperation: func(in, _ any) string { return describeOp(in.(Op)) },
		DescribeState:     func(s any) string { return describeState(s.(state)) },
	}
	return nm.ToModel()
}

// describeOp is a short text for the visualisation, such as
// "c3 n2 mcp/2025-11-25 new completed exec_ab12… =R fp=a".
func describeOp(op Op) string {
	var b strings.Builder
	fmt.Fprintf(&b, "c%d %s %s ", op.Client, op.Node, op.Transport)
	switch op.Kind {
	case KindOK:
		what := "new"
		if op.Replayed {
			what = "replay"
		}
		fmt.Fprintf(&b, "%s %s %s =%s", what, op.Status, short(op.ExecutionID, 16), short(op.Result, 24))
	case KindUncertain:
		fmt.Fprintf(&b, "uncertain %s %s", op.Status, short(op.ExecutionID, 16))
	case KindConflict:
		fmt.Fprintf(&b, "conflict %s", short(op.ExecutionID, 16))
	default:
		b.WriteString(op.Kind.String())
	}
	fmt.Fprintf(&b, " fp=%s", short(op.Fingerprint, 8))
	return b.String()
}

// describeState is a short text for the visualisation, such as
// "held fp=a exec=exec_ab12… final completed =R".
func describeState(s state) string {
	if s.phase == vacant {
		if s.released != "" {
			return "vacant released=" + s.released
		}
		return "vacant"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "held fp=%s exec=%s %s", short(s.fp, 8), short(s.exec, 16), s.phase)
	if s.outKnown {
		fmt.Fprintf(&b, " %s =%s", s.outStatus, short(s.outResult, 24))
	}
	if s.releasable {
		b.WriteString(" releasable")
	}
	if s.noRun {
		b.WriteString(" no-run")
	}
	if s.lostBy != noDeadline && s.phase == running {
		fmt.Fprintf(&b, " lost-by=%d", s.lostBy)
	}
	if s.finalBy != noDeadline {
		fmt.Fprintf(&b, " final-by=%d", s.finalBy)
	}
	return b.String()
}

// short cuts s to n bytes, marking the cut; "?" stands for "".
func short(s string, n int) string {
	if s == "" {
		return "?"
	}
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
