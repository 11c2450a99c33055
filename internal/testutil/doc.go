// Package testutil helps tests run real carmy processes: build the binary,
// start nodes on loopback ports chosen by the kernel, wait for them to
// serve, and stop them (gracefully or with SIGKILL) when the test ends.
package testutil
