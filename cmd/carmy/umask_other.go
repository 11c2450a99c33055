//go:build !unix

package main

// privateUmask does nothing where there is no umask; the cluster package
// still makes the data dir and the snapshots private.
func privateUmask() {}
