// Package embed runs a whole Carmy node inside a Go program, as the
// carmy binary does: the runtime (a carmy.Runtime with its tools) on a
// Raft cluster member or on a node of a fleet sharing a PostgreSQL
// database, serving the HTTP API, MCP, the gateway to upstream MCP
// servers and the console on one listener. etcd's embed package is the
// model.
//
//	app := carmy.App(carmy.WithNodeID("n1"))
//	app.Tool("create_order", createOrder)
//	node, err := embed.StartNode(ctx, embed.Config{Runtime: app, Listener: ln,
//		Raft: &cluster.Config{DataDir: dir, RaftAddr: raftAddr, GossipAddr: gossipAddr, Bootstrap: true, ClusterKey: key}})
//	<-node.Ready()          // a call can succeed (select on node.Done() too)
//	err = node.Close(ctx)   // hands leadership over, drains the tools, closes Raft and the listener
//
// A Config built by hand gets what it sets and nothing more. To run a node
// with the policy of the carmy binary — the config file's tools, tokens and
// MCP servers, the per-tenant fair shares and byte bounds, the access
// rules, the refusal of anonymous callers off loopback — build it as the
// binary does:
//
//	fc, err := embed.LoadConfig("/etc/carmy/carmy.yaml")
//	cfg, err := embed.NewConfig(embed.Settings{File: fc, NodeID: "n1", DataDir: dir, Listener: ln,
//		Raft: &cluster.Config{RaftAddr: raftAddr, GossipAddr: gossipAddr, Bootstrap: true, ClusterKey: key}})
//	node, err := embed.StartNode(ctx, cfg)
//
// cmd/carmy is that and no more: flags and environment → Settings →
// NewConfig → StartNode, with the node security material (keys, TLS
// files) and the listener its own.
//
// It is the package that links the back ends (hashicorp/raft, memberlist,
// pgx): a program that only embeds the runtime imports package carmy,
// which links none of them. Dependencies point one way:
// cmd/carmy → embed → carmy → api → engine → store, and embed → cluster,
// store/postgres, mcpgateway.
package embed
