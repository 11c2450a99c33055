package peer

import (
	"strings"
	"testing"
)

// The paths, headers, the stream's upgrade token and the states of an
// attempt that travel between nodes are the protocol's (see doc.go,
// Compatibility): a node of a build from before package peer named them
// sends and reads exactly these, so renaming one in the code must not
// rename it between nodes.
func TestProtocolNamesAreUnchanged(t *testing.T) {
	for got, want := range map[string]string{
		Prefix:             "/internal/",
		PathStream:         "/internal/v1/stream",
		PathReadIndex:      "/internal/v1/readindex",
		PathJoin:           "/internal/v1/join",
		PathRemove:         "/internal/v1/remove",
		PathState:          "/internal/v1/state",
		PathSilence:        "/internal/v1/silence",
		KeyHeader:          "Carmy-Cluster-Key",
		NodeIDHeader:       "Carmy-Node-Id",
		ActorHeader:        "Carmy-Actor",
		ProtocolHeader:     "Carmy-Protocol",
		StreamProtocol:     "carmy-forward/1",
		StateNotLeader:     "not_leader",
		StateCommitUnknown: "commit_unknown",
	} {
		if got != want {
			t.Errorf("%q between nodes, want %q", got, want)
		}
	}
	for _, p := range []string{PathStream, PathReadIndex, PathJoin, PathRemove, PathState, PathSilence} {
		if !strings.HasPrefix(p, Prefix) {
			t.Errorf("%s is not under Prefix %s", p, Prefix)
		}
	}
}
