package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/carmyhq/carmy/api/client"
	"github.com/carmyhq/carmy/api/wire"
	"github.com/carmyhq/carmy/internal/certs"
	"github.com/carmyhq/carmy/internal/didyoumean"
	"github.com/carmyhq/carmy/internal/netaddr"
)

// `carmy cluster status|join|remove` wraps the admin API of docs/api.md#cluster-administration for
// operators: one HTTP request to one node, its answer printed as a table
// (or as the raw JSON with --json).

const clusterUsage = `Usage: carmy cluster <command> [flags]

Administers a Carmy cluster through the admin API of any one of its nodes.

Commands:
  status                                          show the leader, the members and the log's progress
  join --id ID --raft-addr H:P --http-addr H:P    add a voter (the same again is a no-op)
  remove ID                                       remove a node from the Raft configuration

Flags (every command):
  --addr host:port   the node to ask; http:// or https:// URLs too (default 127.0.0.1:8080) [$CARMY_ADDR]
  --ca-file PEM      CA certificates to trust for https:// besides the system's [$CARMY_CA_FILE]
  --token secret     the admin token, sent as Authorization: Bearer [$CARMY_ADMIN_TOKEN]
  --json             print the node's JSON answer as it is
  --timeout d        bound on the request (default 10s)

join flags:
  --id ID            the new node's --node-id
  --raft-addr H:P    the new node's Raft address, as the others reach it
  --http-addr H:P    the new node's HTTP address, as the others reach it

remove takes the node's id as its argument or as --id.

Examples:
  carmy cluster status --addr 127.0.0.1:8081
  carmy cluster join --id node4 --raft-addr 10.0.0.4:8300 --http-addr 10.0.0.4:8080
  CARMY_ADMIN_TOKEN=… carmy cluster remove node4 --addr 10.0.0.1:8080
`

// Environment variables of `carmy cluster`.
const (
	envClusterAddr = "CARMY_ADDR"
	envAdminToken  = "CARMY_ADMIN_TOKEN"
)

// clusterOptions is what `carmy cluster` is told by flags and the
// environment.
type clusterOptions struct {
	Addr    string
	Token   string
	CAFile  string
	JSON    bool
	Timeout time.Duration
	// join and remove
	ID       string
	RaftAddr string
	HTTPAddr string
}

// clusterCmd runs `carmy cluster args…`, reading its defaults through getenv.
func clusterCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, clusterUsage)
		return errUsage
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, clusterUsage)
		return nil
	case "status", "join", "remove":
	default:
		fmt.Fprintf(stderr, "carmy cluster: unknown command %q\n\n%s", sub, clusterUsage)
		return errUsage
	}

	opts, pos, err := parseClusterFlags(sub, rest, getenv, stdout, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	usageErr := func(format string, a ...any) error {
		fmt.Fprintf(stderr, "carmy cluster %s: %s\n\nRun 'carmy cluster --help' for the usage.\n", sub, fmt.Sprintf(format, a...))
		return errUsage
	}
	base, err := baseURL(opts.Addr)
	if err != nil {
		return usageErr("%v", err)
	}
	if opts.Timeout <= 0 {
		return usageErr("--timeout %s: must be positive", opts.Timeout)
	}
	c, err := newAdminClient(opts, base)
	if err != nil {
		return usageErr("%v", err)
	}

	var (
		method, path string
		send         func(ctx context.Context) (*client.ClusterStatus, error)
		done         string // what an operator is told before the status
	)
	switch sub {
	case "status":
		if len(pos) > 0 {
			return usageErr("unexpected argument %q", pos[0])
		}
		if opts.ID != "" || opts.RaftAddr != "" || opts.HTTPAddr != "" {
			return usageErr("--id, --raft-addr and --http-addr belong to join and remove")
		}
		method, path = http.MethodGet, "/v1/cluster"
		send = c.ClusterStatus
	case "join":
		if len(pos) > 0 {
			return usageErr("unexpected argument %q (give the node's id as --id)", pos[0])
		}
		var missing []string
		for _, f := range []struct{ name, value string }{{"--id", opts.ID}, {"--raft-addr", opts.RaftAddr}, {"--http-addr", opts.HTTPAddr}} {
			if f.value == "" {
				missing = append(missing, f.name)
			}
		}
		if len(missing) > 0 {
			return usageErr("%s required: the new node's id, and the Raft and HTTP addresses the other nodes reach it at, e.g.\n"+
				"  carmy cluster join --id node2 --raft-addr 10.0.0.2:8300 --http-addr 10.0.0.2:8080", plural(missing, "is", "are"))
		}
		for _, f := range []struct{ name, value string }{{"--raft-addr", opts.RaftAddr}, {"--http-addr", opts.HTTPAddr}} {
			if _, _, err := net.SplitHostPort(f.value); err != nil {
				return usageErr("%s %q: want host:port", f.name, f.value)
			}
		}
		method, path = http.MethodPost, "/v1/cluster/nodes"
		spec := wire.NodeSpec{ID: opts.ID, RaftAddr: opts.RaftAddr, HTTPAddr: opts.HTTPAddr}
		send = func(ctx context.Context) (*client.ClusterStatus, error) { return c.AddNode(ctx, spec) }
		done = fmt.Sprintf("Added %s (raft %s, http %s).", opts.ID, opts.RaftAddr, opts.HTTPAddr)
	case "remove":
		id := opts.ID
		switch {
		case len(pos) > 1:
			return usageErr("remove takes one node id, got %q", pos)
		case len(pos) == 1 && id != "" && pos[0] != id:
			return usageErr("two ids: %q and --id %q", pos[0], id)
		case len(pos) == 1:
			id = pos[0]
		}
		if id == "" {
			return usageErr("which node? give its id, e.g. carmy cluster remove node3")
		}
		if opts.RaftAddr != "" || opts.HTTPAddr != "" {
			return usageErr("--raft-addr and --http-addr belong to join")
		}
		method, path = http.MethodDelete, "/v1/cluster/nodes/"+url.PathEscape(id)
		send = func(ctx context.Context) (*client.ClusterStatus, error) { return c.RemoveNode(ctx, id) }
		done = fmt.Sprintf("Removed %s.", id)
	}

	if sub == "join" {
		done = joinMessage(ctx, c, opts, done)
	}
	ask := adminRequest{addr: opts.Addr, url: base + path, method: method, timeout: opts.Timeout, token: opts.Token != ""}
	st, raw, err := ask.send(ctx, send)
	if opts.JSON && raw != nil {
		stdout.Write(raw)
		if !bytes.HasSuffix(raw, []byte("\n")) {
			fmt.Fprintln(stdout)
		}
	}
	if err != nil || opts.JSON {
		return err
	}
	if done != "" {
		fmt.Fprintln(stdout, done)
		fmt.Fprintln(stdout)
	}
	return printClusterStatus(stdout, st.ClusterStatus)
}

// joinMessage returns what join tells an operator: added (added), nothing
// changed when the node is a member at these addresses already (the join
// is then a no-op, docs/api.md#cluster-administration), or its addresses updated. It asks the
// cluster's status first; when that fails, the join itself will say why,
// and added is returned.
func joinMessage(ctx context.Context, c *client.Client, opts clusterOptions, added string) string {
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	st, err := c.ClusterStatus(ctx)
	if err != nil {
		return added
	}
	for _, m := range st.Nodes {
		if m.ID != opts.ID {
			continue
		}
		if m.RaftAddr == opts.RaftAddr && m.HTTPAddr == opts.HTTPAddr {
			return fmt.Sprintf("%s is already a member at these addresses: nothing changed.", opts.ID)
		}
		was := func(a string) string {
			if a == "" {
				return "none"
			}
			return a
		}
		return fmt.Sprintf("Updated %s: raft %s (was %s), http %s (was %s).", opts.ID, opts.RaftAddr, was(m.RaftAddr), opts.HTTPAddr, was(m.HTTPAddr))
	}
	return added
}

// parseClusterFlags parses the flags of `carmy cluster sub`, which may come
// before or after its positional arguments (carmy cluster remove node3
// --addr …).
func parseClusterFlags(sub string, args []string, getenv func(string) string, stdout, stderr io.Writer) (clusterOptions, []string, error) {
	opts := clusterOptions{Addr: "127.0.0.1:8080", Token: getenv(envAdminToken), CAFile: getenv(certs.EnvCAFile), Timeout: 10 * time.Second}
	if a := getenv(envClusterAddr); a != "" {
		opts.Addr = a
	}
	fs := flag.NewFlagSet("carmy cluster "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {} // --help prints clusterUsage to stdout; an error says where the usage is (below)
	fs.StringVar(&opts.Addr, "addr", opts.Addr, "")
	fs.StringVar(&opts.Token, "token", opts.Token, "")
	fs.StringVar(&opts.CAFile, "ca-file", opts.CAFile, "")
	fs.BoolVar(&opts.JSON, "json", false, "")
	fs.DurationVar(&opts.Timeout, "timeout", opts.Timeout, "")
	if sub != "status" {
		fs.StringVar(&opts.ID, "id", "", "")
	}
	if sub == "join" {
		fs.StringVar(&opts.RaftAddr, "raft-addr", "", "")
		fs.StringVar(&opts.HTTPAddr, "http-addr", "", "")
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(stdout, clusterUsage)
				return opts, nil, flag.ErrHelp
			}
			fmt.Fprintf(stderr, "carmy cluster %s: %s\n\nRun 'carmy cluster --help' for the usage.\n", sub, didyoumean.FlagError(err, fs))
			return opts, nil, errUsage
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return opts, pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			// After "--" everything is an argument.
			return opts, append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// baseURL turns --addr (host:port, or an http:// or https:// URL) into the
// URL requests are made against.
func baseURL(addr string) (string, error) {
	u, err := netaddr.BaseURL(addr)
	if err != nil {
		return "", fmt.Errorf("--addr %w", err)
	}
	return u, nil
}

func plural(names []string, one, many string) string {
	if len(names) == 1 {
		return names[0] + " " + one
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1] + " " + many
}

// printClusterStatus prints st as a table, the leader's line marked *.
func printClusterStatus(w io.Writer, st wire.ClusterStatus) error {
	if st.Store == "postgres" {
		return printFleetStatus(w, st)
	}
	var b bytes.Buffer
	leaderID := ""
	if st.Leader != nil && st.Leader.ID != "" {
		leaderID = st.Leader.ID
		fmt.Fprintf(&b, "Leader: %s (http %s)\n\n", leaderID, orDash(st.Leader.HTTPAddr))
	} else {
		fmt.Fprint(&b, "Leader: none known to this node\n\n")
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  ID\tRAFT ADDR\tHTTP ADDR\tSUFFRAGE\tGOSSIP\tVERSION")
	for _, n := range byID(st.Nodes) {
		mark := " "
		if n.ID == leaderID {
			mark = "*"
		}
		fmt.Fprintf(tw, "%s %s\t%s\t%s\t%s\t%s\t%s\n", mark, orDash(n.ID), orDash(n.RaftAddr), orDash(n.HTTPAddr), orDash(n.Suffrage), orDash(n.Gossip), orDash(n.Version))
	}
	if len(st.Nodes) == 0 {
		fmt.Fprintln(tw, "  (no members)")
	}
	tw.Flush()
	fmt.Fprintf(&b, "\nCommit index: %d, applied index: %d\n", st.CommitIndex, st.AppliedIndex)
	fmt.Fprintf(&b, "Entries: %d of capacity %d\n", st.Entries, st.Capacity)
	_, err := w.Write(b.Bytes())
	return err
}

// printFleetStatus prints the status of a fleet on PostgreSQL: the
// database, and the nodes by their heartbeats.
func printFleetStatus(w io.Writer, st wire.ClusterStatus) error {
	var b bytes.Buffer
	db := "unreachable from this node"
	if st.Database != nil && st.Database.Reachable {
		db = "PostgreSQL " + orDash(st.Database.Version) + ", schema " + orDash(st.Database.Schema)
	}
	fmt.Fprintf(&b, "Store: PostgreSQL (no leader: the nodes share the database)\nDatabase: %s\n\n", db)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tHTTP ADDR\tHEARTBEAT\tLAST HEARTBEAT\tVERSION")
	for _, n := range byID(st.Nodes) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", orDash(n.ID), orDash(n.HTTPAddr), orDash(n.Heartbeat), orDash(n.LastHeartbeat), orDash(n.Version))
	}
	if len(st.Nodes) == 0 {
		fmt.Fprintln(tw, "(no nodes)")
	}
	tw.Flush()
	fmt.Fprintf(&b, "\nEntries: %d of capacity %d\n", st.Entries, st.Capacity)
	_, err := w.Write(b.Bytes())
	return err
}

// byID returns a copy of nodes sorted by id: the order a person looks
// for a node in, whatever order the node answered them in.
func byID(nodes []wire.ClusterNode) []wire.ClusterNode {
	return slices.SortedFunc(slices.Values(nodes), func(a, b wire.ClusterNode) int { return strings.Compare(a.ID, b.ID) })
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
