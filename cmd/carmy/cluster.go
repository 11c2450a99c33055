package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/carmyhq/carmy/internal/certs"
)

// `carmy cluster status|join|remove` wraps the admin API of SPEC §2.6 for
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
	tc, err := certs.ClientConfig(opts.CAFile)
	if err != nil {
		return usageErr("%v", err)
	}
	hc := http.DefaultClient
	if tc != nil {
		hc = &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: tc}}
	}
	c := &adminClient{base: base, addr: opts.Addr, token: opts.Token, timeout: opts.Timeout, hc: hc}

	var (
		method, path string
		body         []byte
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
		body, _ = json.Marshal(map[string]string{"id": opts.ID, "raft_addr": opts.RaftAddr, "http_addr": opts.HTTPAddr})
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
		done = fmt.Sprintf("Removed %s.", id)
	}

	if sub == "join" {
		done = joinMessage(ctx, c, opts, done)
	}
	raw, err := c.do(ctx, method, path, body)
	if opts.JSON && raw != nil {
		stdout.Write(raw)
		if !bytes.HasSuffix(raw, []byte("\n")) {
			fmt.Fprintln(stdout)
		}
	}
	if err != nil || opts.JSON {
		return err
	}
	var st clusterStatus
	if err := json.Unmarshal(raw, &st); err != nil {
		return fmt.Errorf("%s %s answered something that is not a cluster status: %v", method, c.base+path, err)
	}
	if done != "" {
		fmt.Fprintln(stdout, done)
		fmt.Fprintln(stdout)
	}
	return printClusterStatus(stdout, st)
}

// joinMessage returns what join tells an operator: added (added), nothing
// changed when the node is a member at these addresses already (the join
// is then a no-op, SPEC §2.6), or its addresses updated. It asks the
// cluster's status first; when that fails, the join itself will say why,
// and added is returned.
func joinMessage(ctx context.Context, c *adminClient, opts clusterOptions, added string) string {
	raw, err := c.do(ctx, http.MethodGet, "/v1/cluster", nil)
	if err != nil {
		return added
	}
	var st clusterStatus
	if json.Unmarshal(raw, &st) != nil {
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
	fs.SetOutput(stderr)
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
			fmt.Fprintf(stderr, "\nRun 'carmy cluster --help' for the usage.\n")
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
	if strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://") {
		u, err := url.Parse(addr)
		if err != nil || u.Host == "" {
			return "", fmt.Errorf("--addr %q: want host:port or an http:// URL", addr)
		}
		return strings.TrimSuffix(u.String(), "/"), nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", fmt.Errorf("--addr %q: want host:port (e.g. 127.0.0.1:8080) or an http:// URL", addr)
	}
	return "http://" + addr, nil
}

func plural(names []string, one, many string) string {
	if len(names) == 1 {
		return names[0] + " " + one
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1] + " " + many
}

// adminClient makes one request of a node's admin API.
type adminClient struct {
	base    string // http://host:port
	addr    string // as the operator gave it
	token   string
	timeout time.Duration
	hc      *http.Client
}

// maxAnswer bounds the answer read from a node.
const maxAnswer = 8 << 20

// apiError is an error answer of the API (SPEC §2.2), printed as
// "CODE: message".
type apiError struct {
	Status  int
	Code    string
	Message string
	hint    string
}

func (e *apiError) Error() string {
	msg := e.Code + ": " + e.Message
	if e.hint != "" {
		msg += " (" + e.hint + ")"
	}
	return msg
}

// do sends the request and returns the answer's body. A non-2xx answer is
// an *apiError when it carries the API's error envelope; the body is
// returned with it.
func (c *adminClient) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			return nil, fmt.Errorf("no answer from the node at %s within %s (--timeout)", c.addr, c.timeout)
		case ctx.Err() != nil:
			return nil, fmt.Errorf("%s %s: %w", method, c.base+path, ctx.Err())
		}
		return nil, fmt.Errorf("could not reach the node at %s (is it running? set --addr or $%s): %w", c.addr, envClusterAddr, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("reading the answer of %s %s: %w", method, c.base+path, err)
	}
	if resp.StatusCode/100 == 2 {
		return raw, nil
	}
	var env struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &env) != nil || env.Error == nil || env.Error.Code == "" {
		text := strings.TrimSpace(string(raw))
		if len(text) > 200 {
			text = text[:200] + "…"
		}
		return raw, fmt.Errorf("%s %s: %s: %s", method, c.base+path, resp.Status, text)
	}
	e := &apiError{Status: resp.StatusCode, Code: env.Error.Code, Message: env.Error.Message}
	if c.token == "" && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
		e.hint = "no admin token was given: set --token or $" + envAdminToken
	}
	return raw, e
}

// clusterStatus is the answer of GET /v1/cluster (SPEC §2.6).
type clusterStatus struct {
	Store    string `json:"store"`
	Database *struct {
		Reachable bool   `json:"reachable"`
		Version   string `json:"version"`
		Schema    string `json:"schema"`
	} `json:"database"`
	Leader *struct {
		ID       string `json:"id"`
		HTTPAddr string `json:"http_addr"`
	} `json:"leader"`
	Nodes []struct {
		ID       string `json:"id"`
		RaftAddr string `json:"raft_addr"`
		HTTPAddr string `json:"http_addr"`
		Suffrage string `json:"suffrage"`
		Gossip   string `json:"gossip"`

		Heartbeat     string `json:"heartbeat"`
		LastHeartbeat string `json:"last_heartbeat"`
		Version       string `json:"version"`
	} `json:"nodes"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	Entries      int    `json:"entries"`
	Capacity     int    `json:"capacity"`
}

// printClusterStatus prints st as a table, the leader's line marked *.
func printClusterStatus(w io.Writer, st clusterStatus) error {
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
	fmt.Fprintln(tw, "  ID\tRAFT ADDR\tHTTP ADDR\tSUFFRAGE\tGOSSIP")
	for _, n := range st.Nodes {
		mark := " "
		if n.ID == leaderID {
			mark = "*"
		}
		fmt.Fprintf(tw, "%s %s\t%s\t%s\t%s\t%s\n", mark, orDash(n.ID), orDash(n.RaftAddr), orDash(n.HTTPAddr), orDash(n.Suffrage), orDash(n.Gossip))
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
func printFleetStatus(w io.Writer, st clusterStatus) error {
	var b bytes.Buffer
	db := "unreachable from this node"
	if st.Database != nil && st.Database.Reachable {
		db = "PostgreSQL " + orDash(st.Database.Version) + ", schema " + orDash(st.Database.Schema)
	}
	fmt.Fprintf(&b, "Store: PostgreSQL (no leader: the nodes share the database)\nDatabase: %s\n\n", db)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tHTTP ADDR\tHEARTBEAT\tLAST HEARTBEAT\tVERSION")
	for _, n := range st.Nodes {
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

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
