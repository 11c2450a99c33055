package gossip

import (
	"crypto/hkdf"
	"crypto/sha256"
	"fmt"

	"github.com/hashicorp/memberlist"
)

// HookedTransport makes the transport memberlist would make for mc (whose
// address is addr, named in errors), wrapped by wrap. Like memberlist, it retries a bind to port
// 0 and then sets mc's ports to the one bound.
func HookedTransport(mc *memberlist.Config, addr string, wrap func(memberlist.NodeAwareTransport) memberlist.NodeAwareTransport) (memberlist.NodeAwareTransport, error) {
	nc := &memberlist.NetTransportConfig{
		BindAddrs: []string{mc.BindAddr}, BindPort: mc.BindPort, Logger: mc.Logger, MetricLabels: mc.MetricLabels,
	}
	tries := 1
	if mc.BindPort == 0 {
		tries = 10 // another socket may take the TCP port's number on UDP
	}
	var nt *memberlist.NetTransport
	var err error
	for range tries {
		if nt, err = memberlist.NewNetTransport(nc); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: gossip transport on %s: %w", addr, err)
	}
	if mc.BindPort == 0 {
		mc.BindPort = nt.GetAutoBindPort()
		mc.AdvertisePort = mc.BindPort
	}
	return wrap(nt), nil
}

// keyInfo is the HKDF info of the gossip key derived from the
// cluster key: a key of its own for each use, and a version should the
// derivation ever change.
const keyInfo = "carmy gossip key v1"

// Keys returns the keys gossip runs under: given, when there are any;
// else, with a cluster key, one 32-byte key derived from it
// (HKDF-SHA256, no salt, info keyInfo), so that nodes sharing a
// cluster key gossip encrypted and authenticated with no more setup, and
// nodes of another cluster cannot join; else none.
func Keys(given [][]byte, clusterKey string) ([][]byte, error) {
	if len(given) > 0 || clusterKey == "" {
		return given, nil
	}
	k, err := hkdf.Key(sha256.New, []byte(clusterKey), nil, keyInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("cluster: deriving the gossip key: %w", err)
	}
	return [][]byte{k}, nil
}
