package peer

import (
	"strings"
	"testing"
)

// The paths and headers on the wire are the protocol's (see doc.go,
// Compatibility): a node of a build from before package peer named them
// calls and serves exactly these, so renaming one in the code must not
// rename it on the wire.
func TestWireNamesAreUnchanged(t *testing.T) {
	for got, want := range map[string]string{
		Prefix:         "/internal/",
		PathStream:     "/internal/v1/stream",
		PathReadIndex:  "/internal/v1/readindex",
		PathJoin:       "/internal/v1/join",
		PathRemove:     "/internal/v1/remove",
		PathState:      "/internal/v1/state",
		PathSilence:    "/internal/v1/silence",
		KeyHeader:      "Carmy-Cluster-Key",
		NodeIDHeader:   "Carmy-Node-Id",
		ActorHeader:    "Carmy-Actor",
		ProtocolHeader: "Carmy-Protocol",
	} {
		if got != want {
			t.Errorf("%q on the wire, want %q", got, want)
		}
	}
	for _, p := range []string{PathStream, PathReadIndex, PathJoin, PathRemove, PathState, PathSilence} {
		if !strings.HasPrefix(p, Prefix) {
			t.Errorf("%s is not under Prefix %s", p, Prefix)
		}
	}
}
