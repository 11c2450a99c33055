package fsm

import (
	"errors"
	"fmt"
	"time"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/audit"
)

// Type tags a command.
type Type string

// The command types.
const (
	TypeReserve     Type = "reserve"
	TypeComplete    Type = "complete"
	TypeCancel      Type = "cancel"
	TypeResolve     Type = "resolve"
	TypeRelease     Type = "release"
	TypeInterrupt   Type = "interrupt"
	TypeExpire      Type = "expire"
	TypeCapacity    Type = "capacity"
	TypeNode        Type = "node"
	TypeNodeRemoved Type = "node_removed"
	// TypeAdmin records an admin action (Action: audit.KindJoin,
	// KindRemove or KindTransfer, on the member NodeID) in the audit
	// ledger; it changes nothing else.
	TypeAdmin Type = "admin"
	// TypeAuditPrune removes the audit ledger's entries older than
	// Cutoff (audit retention); it changes nothing else.
	TypeAuditPrune Type = "audit_prune"
	// TypeAuditCheckpoint appends the leader's signed checkpoint
	// (Checkpoint) to the audit ledger; it changes nothing else.
	TypeAuditCheckpoint Type = "audit_checkpoint"
	// TypeDecide takes a decision (Decision) on the execution ExecutionID,
	// awaiting approval (store.Store.Decide).
	TypeDecide Type = "decide"
)

// Command is one command of the log: a type and exactly the payload that
// type needs. On the log it is in the binary form of codec.go (Encode,
// Decode), whose first byte names the form and its version; the JSON tags
// only name the fields for logs and tests.
type Command struct {
	Type Type `json:"type"`

	Key          *store.Key        `json:"key,omitempty"`
	Fingerprint  string            `json:"fingerprint,omitempty"`
	Execution    *store.Execution  `json:"execution,omitempty"`
	Result       *store.Result     `json:"result,omitempty"`
	ExecutionID  string            `json:"execution_id,omitempty"`
	AllowRunning bool              `json:"allow_running,omitempty"`
	NodeID       string            `json:"node_id,omitempty"`
	Cutoff       time.Time         `json:"cutoff,omitzero"`
	Capacity     int               `json:"capacity,omitempty"`
	MaxBytes     int64             `json:"max_bytes,omitempty"`
	Node         *NodeInfo         `json:"node,omitempty"`
	Resolution   *store.Resolution `json:"resolution,omitempty"`
	Action       string            `json:"action,omitempty"`
	Checkpoint   *audit.Signed     `json:"checkpoint,omitempty"`
	Decision     *store.Decision   `json:"decision,omitempty"`

	// At and Actor are when and by whom the command was proposed, for the
	// audit ledger: the proposing node stamps them (cluster's Node.Apply),
	// so that applying never reads a clock. Actor is a principal, "probe"
	// (store.ResolvedByProbe) or a node's id.
	At    time.Time `json:"at,omitzero"`
	Actor string    `json:"actor,omitempty"`
}

// NodeInfo is what the cluster knows of a member: its addresses.
type NodeInfo struct {
	ID         string `json:"id"`
	RaftAddr   string `json:"raft_addr"`
	HTTPAddr   string `json:"http_addr"`
	GossipAddr string `json:"gossip_addr,omitempty"`
}

// Constructors of each command.

// Reserve proposes exec for an identity.
func Reserve(key store.Key, fingerprint string, exec store.Execution) Command {
	return Command{Type: TypeReserve, Key: &key, Fingerprint: fingerprint, Execution: &exec}
}

// Complete records an execution's result.
func Complete(key store.Key, fingerprint string, res store.Result) Command {
	return Command{Type: TypeComplete, Key: &key, Fingerprint: fingerprint, Result: &res}
}

// Cancel records cancelled for a running execution.
func Cancel(executionID string, res store.Result) Command {
	return Command{Type: TypeCancel, ExecutionID: executionID, Result: &res}
}

// Resolve settles an open execution with an established outcome.
func Resolve(executionID string, r store.Resolution) Command {
	return Command{Type: TypeResolve, ExecutionID: executionID, Resolution: &r}
}

// Release removes an open execution's reservation.
func Release(executionID string, allowRunning bool) Command {
	return Command{Type: TypeRelease, ExecutionID: executionID, AllowRunning: allowRunning}
}

// Decide takes a decision on an execution awaiting approval.
func Decide(executionID string, d store.Decision) Command {
	return Command{Type: TypeDecide, ExecutionID: executionID, Decision: &d}
}

// Interrupt marks every running execution of a node interrupted.
func Interrupt(nodeID string) Command {
	return Command{Type: TypeInterrupt, NodeID: nodeID}
}

// Expire removes finished records that finished before cutoff.
func Expire(cutoff time.Time) Command {
	return Command{Type: TypeExpire, Cutoff: cutoff}
}

// SetLimits sets the cluster-wide bounds: on records (entries, positive)
// and on bytes (store.RecordSize summed over every record; 0: none).
func SetLimits(entries int, maxBytes int64) Command {
	return Command{Type: TypeCapacity, Capacity: entries, MaxBytes: maxBytes}
}

// SetNode records (or replaces) a member's addresses.
func SetNode(n NodeInfo) Command {
	return Command{Type: TypeNode, Node: &n}
}

// RemoveNode forgets a member's addresses.
func RemoveNode(id string) Command {
	return Command{Type: TypeNodeRemoved, NodeID: id}
}

// Admin records an admin action (audit.KindJoin, KindRemove, KindTransfer)
// on a member in the audit ledger.
func Admin(action, nodeID string) Command {
	return Command{Type: TypeAdmin, Action: action, NodeID: nodeID}
}

// AuditPrune removes the audit ledger's entries older than cutoff.
func AuditPrune(cutoff time.Time) Command {
	return Command{Type: TypeAuditPrune, Cutoff: cutoff}
}

// AuditCheckpoint appends the signed head s to the audit ledger as an
// entry of kind audit.KindCheckpoint.
func AuditCheckpoint(s audit.Signed) Command {
	return Command{Type: TypeAuditCheckpoint, Checkpoint: &s}
}

// ErrMalformed is returned by Decode for bytes that are not a command this
// build reads: malformed, or of a form it does not know (a newer build's,
// or the JSON of builds before the binary codec, which no release wrote).
var ErrMalformed = errors.New("fsm: malformed command")

// Decode parses a command's log bytes, as Encode writes them, and checks
// that its payload is present for its type. Anything else, a form of
// another version included, is refused with ErrMalformed and nothing
// else: a node never applies a command it had to guess at.
func Decode(b []byte) (Command, error) {
	if len(b) == 0 || b[0] != commandTag {
		return Command{}, fmt.Errorf("%w: %s", ErrMalformed, unknownForm(b, commandTag))
	}
	return decodeBinary(b)
}

func (c Command) check() error {
	missing := func(what string) error { return fmt.Errorf("no %s", what) }
	switch c.Type {
	case TypeReserve:
		if c.Key == nil || c.Execution == nil {
			return missing("key or execution")
		}
	case TypeComplete:
		if c.Key == nil || c.Result == nil {
			return missing("key or result")
		}
	case TypeCancel:
		if c.Result == nil {
			return missing("result")
		}
	case TypeResolve:
		if c.Resolution == nil {
			return missing("resolution")
		}
	case TypeRelease, TypeInterrupt, TypeNodeRemoved, TypeExpire, TypeCapacity, TypeAuditPrune:
	case TypeAdmin:
		if c.Action == "" || c.NodeID == "" {
			return missing("action or node")
		}
	case TypeAuditCheckpoint:
		if c.Checkpoint == nil {
			return missing("checkpoint")
		}
	case TypeDecide:
		if c.Decision == nil {
			return missing("decision")
		}
	case TypeNode:
		if c.Node == nil || c.Node.ID == "" {
			return missing("node")
		}
	default:
		return fmt.Errorf("unknown type %q", c.Type)
	}
	return nil
}
