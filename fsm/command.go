package fsm

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/carmyhq/carmy/store"
)

// Version is the command envelope's version. A node refuses (and does not
// apply) a command of a version it does not know, rather than guess.
const Version = 1

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
)

// Command is one entry of the log: a type and exactly the payload that
// type needs.
type Command struct {
	V    int  `json:"v"`
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
	return Command{V: Version, Type: TypeReserve, Key: &key, Fingerprint: fingerprint, Execution: &exec}
}

// Complete records an execution's result.
func Complete(key store.Key, fingerprint string, res store.Result) Command {
	return Command{V: Version, Type: TypeComplete, Key: &key, Fingerprint: fingerprint, Result: &res}
}

// Cancel records cancelled for a running execution.
func Cancel(executionID string, res store.Result) Command {
	return Command{V: Version, Type: TypeCancel, ExecutionID: executionID, Result: &res}
}

// Resolve settles an open execution with an established outcome.
func Resolve(executionID string, r store.Resolution) Command {
	return Command{V: Version, Type: TypeResolve, ExecutionID: executionID, Resolution: &r}
}

// Release removes an open execution's reservation.
func Release(executionID string, allowRunning bool) Command {
	return Command{V: Version, Type: TypeRelease, ExecutionID: executionID, AllowRunning: allowRunning}
}

// Interrupt marks every running execution of a node interrupted.
func Interrupt(nodeID string) Command {
	return Command{V: Version, Type: TypeInterrupt, NodeID: nodeID}
}

// Expire removes finished records that finished before cutoff.
func Expire(cutoff time.Time) Command {
	return Command{V: Version, Type: TypeExpire, Cutoff: cutoff}
}

// SetLimits sets the cluster-wide bounds: on records (entries, positive)
// and on bytes (store.RecordSize summed over every record; 0: none). A
// capacity command of a build before byte bounds carries no max_bytes,
// and so sets none, on every replica alike.
func SetLimits(entries int, maxBytes int64) Command {
	return Command{V: Version, Type: TypeCapacity, Capacity: entries, MaxBytes: maxBytes}
}

// SetNode records (or replaces) a member's addresses.
func SetNode(n NodeInfo) Command {
	return Command{V: Version, Type: TypeNode, Node: &n}
}

// RemoveNode forgets a member's addresses.
func RemoveNode(id string) Command {
	return Command{V: Version, Type: TypeNodeRemoved, NodeID: id}
}

// ErrMalformed is returned by Decode for bytes that are not a command this
// version understands.
var ErrMalformed = errors.New("fsm: malformed command")

// Decode parses log bytes, of either format (the binary one Encode
// writes, or the JSON of earlier builds), into a command and checks that
// its payload is present for its type.
func Decode(b []byte) (Command, error) {
	if len(b) > 0 && b[0] == commandTag {
		return decodeBinary(b)
	}
	var c Command
	if err := json.Unmarshal(b, &c); err != nil {
		return Command{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if c.V != Version {
		return Command{}, fmt.Errorf("%w: version %d, want %d", ErrMalformed, c.V, Version)
	}
	if err := c.check(); err != nil {
		return Command{}, fmt.Errorf("%w: %s: %w", ErrMalformed, c.Type, err)
	}
	return c, nil
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
	case TypeRelease, TypeInterrupt, TypeNodeRemoved, TypeExpire, TypeCapacity:
	case TypeNode:
		if c.Node == nil || c.Node.ID == "" {
			return missing("node")
		}
	default:
		return fmt.Errorf("unknown type %q", c.Type)
	}
	return nil
}
