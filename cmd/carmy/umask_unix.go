//go:build unix

package main

import "syscall"

// privateUmask makes every file and directory the process creates private
// to its user (umask 077): the data dir, Raft's snapshots, keys, logs a
// tool might write. It is set once, by `carmy serve`, before anything is
// opened.
func privateUmask() { syscall.Umask(0o077) }
