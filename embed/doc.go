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
// It is the package that links the back ends (hashicorp/raft, memberlist,
// pgx): a program that only embeds the runtime imports package carmy,
// which links none of them. Dependencies point one way:
// cmd/carmy → embed → carmy → api → engine → store, and embed → cluster,
// store/postgres, mcpgateway.
package embed
