package peer

// The peer endpoints, served under a node's HTTP address (its API port).
//
// The paths on the wire still begin with /internal/: that is what every
// node of protocol version nodeauth.ProtocolVersion sends and serves, so a
// cluster whose nodes run builds from before and after the endpoints were
// named "peer" in the code keeps working. Renaming a path is a change of
// the node protocol (nodeauth.ProtocolVersion), never a refactoring.
const (
	// Prefix is the path prefix of every peer endpoint: mount Handler at
	// it (the API server routes everything under it to the handler and
	// leaves its authentication to it).
	Prefix = "/internal/"
	// PathStream (POST, an upgrade): a follower opens a forward stream to
	// the leader (package forward).
	PathStream = "/internal/v1/stream"
	// PathReadIndex (POST, empty body; IndexAnswer): the leader's read
	// index, for a follower's linearizable read.
	PathReadIndex = "/internal/v1/readindex"
	// PathJoin (POST fsm.NodeInfo; JoinAnswer): add a node, or update a
	// member's addresses; a node that does not lead passes it on.
	PathJoin = "/internal/v1/join"
	// PathRemove (POST RemoveRequest; an empty object): remove a member;
	// a node that does not lead passes it on.
	PathRemove = "/internal/v1/remove"
	// PathState (GET; StateDigest): what state the node has applied.
	PathState = "/internal/v1/state"
	// PathSilence (POST SilenceRequest; LogPosition): another voter found
	// the leader silent.
	PathSilence = "/internal/v1/silence"

	// StreamProtocol names the forward stream in the upgrade of a
	// PathStream request (the Upgrade header, both ways).
	StreamProtocol = "carmy-forward/1"
)
