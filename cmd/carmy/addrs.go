package main

import (
	"fmt"
	"net"
	"strconv"
)

// checkListenAddr reports whether addr, the value of --flag, is a
// host:port a node can listen on, before anything is written to the data
// dir. A bare port ("40085") is the usual slip: the error shows the
// address it most likely meant.
func checkListenAddr(flag, addr string) error {
	// Any host will do: a name, an address, or none (every interface).
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		if _, perr := strconv.ParseUint(addr, 10, 16); perr == nil {
			return fmt.Errorf("--%s %q: want host:port, such as 127.0.0.1:%s (a port alone is not an address)", flag, addr, addr)
		}
		return fmt.Errorf("--%s %q: want host:port, such as 127.0.0.1:8080: %w", flag, addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("--%s %q: the port %q is not a number from 0 to 65535", flag, addr, port)
	}
	return nil
}
