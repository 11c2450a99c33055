// Package egress decides where Carmy may connect on a tool's behalf, and
// says why a connection failed without repeating what was configured.
//
// A Policy is checked when a connection is made, on the address the name
// resolved to, before the connection is attempted (net.Dialer.Control):
// a name that resolves somewhere else on the next lookup (DNS rebinding)
// and a redirect are checked like the first request, and a refused
// address is never sent a packet. By default every address may be
// reached except the built-in deny list: the unspecified addresses,
// link-local networks and the cloud metadata services (see Denied). A
// policy with an allow-list reaches only the networks it lists; an
// address of the deny list stays refused unless an allowed network names
// it at least as narrowly as the deny list does.
//
// HTTP tools use a Policy's Transport; an MCP gateway reaching upstreams
// over HTTP is meant to use the same. Describe, RedactURL and Redactor
// keep configured URLs, headers and secrets out of what a tenant sees.
package egress
