package fsm

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/audit"
)

// DefaultCapacity is the bound on records until a capacity command sets
// one. It is a constant, not a node's flag, so that replicas agree before
// the first capacity command as after it.
const DefaultCapacity = 100000

// Processor applies commands to a store.State and the member table. It is
// deterministic and not safe for concurrent use: the FSM serialises it.
type Processor struct {
	st    *store.State
	nodes map[string]NodeInfo
	// capacitySet: a capacity command has been applied, so the bound is
	// the cluster's choice rather than DefaultCapacity.
	capacitySet bool
	// restoredIndex is the applied index the last restored snapshot
	// recorded.
	restoredIndex uint64
	// drafts are the audit ledger's entries of the commands applied since
	// the last TakeDrafts, in order (audit.go).
	drafts []audit.Draft
	// prune is the latest audit prune cutoff applied since TakeDrafts.
	prune time.Time
}

// NewProcessor returns an empty processor.
func NewProcessor() *Processor {
	return &Processor{st: store.NewState(DefaultCapacity), nodes: make(map[string]NodeInfo)}
}

// State returns the record table. Callers must not change it.
func (p *Processor) State() *store.State { return p.st }

// maxToken bounds fencing tokens: below 2^53, every JSON client reads
// them exactly.
const maxToken = 1<<53 - 1

// Apply applies cmd and returns its outcome. token is the command's
// fencing token, which the FSM derives from where the command is in the
// log (Token); it must grow with every command applied. A reservation
// takes it as its Seq; one whose token is past 2^53 is refused.
//
// The decisions it makes are kept as drafts of audit ledger entries
// (TakeDrafts).
func (p *Processor) Apply(token uint64, c Command) Response {
	r := p.apply(token, c)
	if r.Code == "" {
		p.audit(c, r)
	}
	return r
}

func (p *Processor) apply(token uint64, c Command) Response {
	switch c.Type {
	case TypeReserve:
		if token > maxToken {
			return invalidResponse("the log is past the fencing token range")
		}
		res, err := p.st.Reserve(*c.Key, c.Fingerprint, *c.Execution, token)
		if err != nil {
			return responseOf(store.Record{}, err)
		}
		return Response{Outcome: res.Outcome, Record: res.Record}
	case TypeComplete:
		return responseOf(p.st.Complete(*c.Key, c.Fingerprint, *c.Result))
	case TypeCancel:
		return responseOf(p.st.Cancel(c.ExecutionID, *c.Result))
	case TypeResolve:
		return responseOf(p.st.Resolve(c.ExecutionID, *c.Resolution))
	case TypeRelease:
		return responseOf(p.st.Release(c.ExecutionID, c.AllowRunning))
	case TypeDecide:
		if token > maxToken {
			return invalidResponse("the log is past the fencing token range")
		}
		return responseOf(p.st.Decide(c.ExecutionID, *c.Decision, token))
	case TypeInterrupt:
		recs := p.st.MarkInterruptedRecords(c.NodeID)
		p.auditInterrupted(c, recs)
		return Response{Count: len(recs)}
	case TypeExpire:
		return Response{Count: p.st.Expire(c.Cutoff)}
	case TypeCapacity:
		if c.Capacity <= 0 || c.MaxBytes < 0 {
			return invalidResponse("capacity must be positive and max bytes not negative")
		}
		p.st.SetCapacity(c.Capacity)
		p.st.SetMaxBytes(c.MaxBytes)
		p.capacitySet = true
		return Response{}
	case TypeNode:
		p.nodes[c.Node.ID] = *c.Node
		return Response{}
	case TypeNodeRemoved:
		delete(p.nodes, c.NodeID)
		return Response{}
	case TypeAdmin, TypeAuditPrune, TypeAuditCheckpoint:
		return Response{}
	}
	return invalidResponse("unknown command type " + string(c.Type))
}

// CapacitySet reports whether a capacity command has been applied.
func (p *Processor) CapacitySet() bool { return p.capacitySet }

// Nodes returns the member table, sorted by id.
func (p *Processor) Nodes() []NodeInfo {
	return slices.SortedFunc(maps.Values(p.nodes), func(a, b NodeInfo) int { return strings.Compare(a.ID, b.ID) })
}

// Node returns one member's addresses.
func (p *Processor) Node(id string) (NodeInfo, bool) {
	n, ok := p.nodes[id]
	return n, ok
}
