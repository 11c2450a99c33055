package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/carmyhq/carmy/api/wire"
)

// ClusterStatus is a node's view of its cluster (docs/api.md#cluster-administration): the API's
// wire.ClusterStatus, and the answer as the node sent it (Raw).
type ClusterStatus struct {
	wire.ClusterStatus
	// Raw is the JSON answer as it came, for a caller that passes it on.
	Raw json.RawMessage
}

// UnmarshalJSON decodes the status and keeps the bytes in Raw.
func (s *ClusterStatus) UnmarshalJSON(b []byte) error {
	s.Raw = append(json.RawMessage(nil), b...)
	return json.Unmarshal(b, &s.ClusterStatus)
}

// ClusterStatus asks the node for its view of the cluster (GET
// /v1/cluster; the admin token).
func (c *Client) ClusterStatus(ctx context.Context) (*ClusterStatus, error) {
	return c.cluster(ctx, &request{method: http.MethodGet, path: "/v1/cluster", idempotent: true})
}

// AddNode adds n as a voter (POST /v1/cluster/nodes; the admin token) and
// returns the cluster's status after. Adding a member again at the same
// addresses changes nothing, so it is retried like a read.
func (c *Client) AddNode(ctx context.Context, n wire.NodeSpec) (*ClusterStatus, error) {
	if n.ID == "" || n.RaftAddr == "" || n.HTTPAddr == "" {
		return nil, usage("AddNode needs the node's ID, RaftAddr and HTTPAddr")
	}
	raw, err := json.Marshal(n)
	if err != nil {
		return nil, fmt.Errorf("carmy: encoding the node: %w", err)
	}
	return c.cluster(ctx, &request{method: http.MethodPost, path: "/v1/cluster/nodes", body: raw, idempotent: true})
}

// RemoveNode removes the node id from the cluster's configuration (DELETE
// /v1/cluster/nodes/{id}; the admin token) and returns the cluster's
// status after. It is not retried when its fate is unknown: a second
// attempt after one that took effect answers NOT_FOUND.
func (c *Client) RemoveNode(ctx context.Context, id string) (*ClusterStatus, error) {
	if id == "" {
		return nil, usage("RemoveNode needs the node's id")
	}
	return c.cluster(ctx, &request{method: http.MethodDelete, path: "/v1/cluster/nodes/" + url.PathEscape(id)})
}

func (c *Client) cluster(ctx context.Context, req *request) (*ClusterStatus, error) {
	var st ClusterStatus
	if _, err := c.do(ctx, req, &st); err != nil {
		return nil, err
	}
	return &st, nil
}
