// Package testutil helps tests run real carmy processes: build the binary,
// start nodes on loopback ports chosen by the kernel, wait for them to
// serve, and stop them (gracefully or with SIGKILL) when the test ends. It
// also runs clusters of them (cluster.go): start N nodes that form one,
// restart a node from its data dir at its previous addresses, add one,
// and find the leader through GET /v1/cluster.
//
// It is a test harness, not a supported API: only tests (_test.go files)
// import it, and it changes with them.
package testutil
