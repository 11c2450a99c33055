package cluster

import (
	"errors"
	"log/slog"
	"net"
	"testing"

	"github.com/hashicorp/raft"
)

func TestRaftAdvertise(t *testing.T) {
	bound := &net.TCPAddr{IP: net.ParseIP("172.20.0.4"), Port: 8300}
	for _, tc := range []struct {
		flag  string
		bound *net.TCPAddr
		want  string
		err   bool
	}{
		{"n1:8300", bound, "n1:8300", false},                                                     // a name is advertised as given
		{"n1:0", &net.TCPAddr{IP: bound.IP, Port: 41000}, "n1:41000", false},                     // with the bound port
		{"172.20.0.4:8300", bound, "172.20.0.4:8300", false},                                     // an IP as bound
		{"127.0.0.1:0", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5}, "127.0.0.1:5", false}, // port 0 on an IP
		{"0.0.0.0:8300", &net.TCPAddr{IP: net.IPv4zero, Port: 8300}, "", true},                   // unspecified: not advertisable
		{":8300", &net.TCPAddr{IP: net.IPv6unspecified, Port: 8300}, "", true},
	} {
		got, err := raftAdvertise(tc.flag, tc.bound)
		if tc.err {
			if err == nil {
				t.Errorf("%s: advertised %v, want an error", tc.flag, got)
			}
			continue
		}
		if err != nil || got.String() != tc.want || got.Network() != "tcp" {
			t.Errorf("%s bound %s: got %v, %v; want %s", tc.flag, tc.bound, got, err, tc.want)
		}
	}
}

// TestReplicationIsNotPipelined pins raftMaxInFlight: the transport refuses
// a pipeline, so Raft replicates with one AppendEntries at a time and never
// enters hashicorp/raft's pipeline, whose decoder can stop reading while its
// sender waits on it for good (a follower starved of entries, a leader whose
// Shutdown hangs).
func TestReplicationIsNotPipelined(t *testing.T) {
	tr, _, err := newTransport(Config{NodeID: "n1", RaftAddr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler), ClusterKey: "test-cluster-key-0123456789"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	p, err := tr.AppendEntriesPipeline("n2", "127.0.0.1:1")
	if !errors.Is(err, raft.ErrPipelineReplicationNotSupported) {
		if p != nil {
			_ = p.Close()
		}
		t.Fatalf("AppendEntriesPipeline: %v, want ErrPipelineReplicationNotSupported", err)
	}
}
