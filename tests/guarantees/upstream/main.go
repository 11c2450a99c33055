// Command upstream is the guarantee suite's tool server: one tool, act,
// served as an HTTP tool (POST /act), as an MCP server over Streamable HTTP
// (/mcp) and over stdio (-stdio), with the reconcile probes of each
// (GET /probe/{request_id}, the MCP tool find). Every run of act is
// written to a ledger file, one JSON object a line, which the suite reads
// to count how often a tool body started and whether its effect happened;
// the ledger survives a restart of the server, so the probe still knows
// what an earlier process did.
//
// act takes {"mode", "ms", "n"}:
//   - ok: start, effect, answer {"request_id", "n"};
//   - sleep: start, then wait ms milliseconds (effect, answer) or until the
//     call is cancelled ("cancelled" on the ledger, no effect);
//   - cut: start, effect, then the connection is cut (stdio: the process
//     exits) before any answer: an answer lost after the effect;
//   - cutbefore: start, then cut with no effect: an answer lost, nothing done.
//
// With -down FILE a stdio server whose FILE exists exits at once: an
// upstream that cannot be started. -pids DIR gets a file named after the
// process id, so the suite can kill every child of a stdio server.
//
// It is a test harness, not a supported program: it changes with the
// suite.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	httpAddr := flag.String("http", "", "serve HTTP (the tool, the probe and /mcp) on this address")
	stdio := flag.Bool("stdio", false, "serve MCP over stdin and stdout")
	ledgerPath := flag.String("ledger", "", "the ledger file (required)")
	down := flag.String("down", "", "with -stdio: exit at once when this file exists")
	pids := flag.String("pids", "", "with -stdio: a directory to write a file named after the process id into")
	flag.Parse()
	if *ledgerPath == "" || (*httpAddr == "") == !*stdio {
		log.Fatal("upstream: -ledger and one of -http or -stdio are required")
	}
	if *down != "" {
		if _, err := os.Stat(*down); err == nil {
			log.Fatal("upstream: down")
		}
	}
	l, err := openLedger(*ledgerPath)
	if err != nil {
		log.Fatal(err)
	}
	if *stdio {
		pidFile := ""
		if *pids != "" {
			pidFile = filepath.Join(*pids, strconv.Itoa(os.Getpid()))
			if err := os.WriteFile(pidFile, nil, 0o600); err != nil {
				log.Fatal(err)
			}
		}
		s := newMCPServer(l, func(mode string) {
			if pidFile != "" {
				os.Remove(pidFile)
			}
			os.Exit(3) // dies mid-call: the request was read, no answer comes
		})
		if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			log.Print(err)
		}
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /act", l.serveAct)
	mux.HandleFunc("GET /probe/{request_id}", l.serveProbe)
	server := newMCPServer(l, nil)
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	mux.Handle("/mcp", cutter{l, mcpHandler})
	log.Printf("upstream: serving on %s", *httpAddr)
	log.Fatal(http.ListenAndServe(*httpAddr, mux))
}

// event is one line of the ledger.
type event struct {
	Ev     string          `json:"ev"` // start, effect, cancelled
	RID    string          `json:"request_id"`
	Exec   string          `json:"execution_id"`
	Via    string          `json:"via"`
	Result json.RawMessage `json:"result,omitempty"`
}

type ledger struct {
	mu      sync.Mutex
	path    string
	effects map[string]json.RawMessage // request_id → the result of its effect
}

func openLedger(path string) (*ledger, error) {
	l := &ledger{path: path, effects: map[string]json.RawMessage{}}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return l, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Ev == "effect" {
			l.effects[e.RID] = e.Result
		}
	}
	return l, sc.Err()
}

// add appends e to the ledger file before it returns.
func (l *ledger) add(e event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.Ev == "effect" {
		l.effects[e.RID] = e.Result
	}
	line, _ := json.Marshal(e)
	f, err := os.OpenFile(l.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(append(line, '\n')); err != nil {
		log.Fatal(err)
	}
}

// effect returns the result of rid's effect, read from the file: the
// children of one stdio server on several nodes share it, and a probe may
// ask one child about another's run.
func (l *ledger) effect(rid string) (json.RawMessage, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if fresh, err := openLedger(l.path); err == nil {
		l.effects = fresh.effects
	}
	r, ok := l.effects[rid]
	return r, ok
}

type actArgs struct {
	Mode string `json:"mode"`
	MS   int    `json:"ms"`
	N    any    `json:"n"`
}

// act runs the tool for (rid, exec) over via; cut (nil for none) is how
// this transport cuts its connection, called after the ledger says what
// happened.
func (l *ledger) act(ctx context.Context, a actArgs, rid, exec, via string, cut func()) (json.RawMessage, error) {
	l.add(event{Ev: "start", RID: rid, Exec: exec, Via: via})
	result, _ := json.Marshal(map[string]any{"request_id": rid, "n": a.N})
	switch a.Mode {
	case "sleep":
		select {
		case <-ctx.Done():
			l.add(event{Ev: "cancelled", RID: rid, Exec: exec, Via: via})
			return nil, ctx.Err()
		case <-time.After(time.Duration(a.MS) * time.Millisecond):
		}
	case "cut", "cutbefore":
		if a.Mode == "cut" {
			l.add(event{Ev: "effect", RID: rid, Exec: exec, Via: via, Result: result})
		}
		if cut != nil {
			cut()
		}
		return nil, fmt.Errorf("cut")
	}
	l.add(event{Ev: "effect", RID: rid, Exec: exec, Via: via, Result: result})
	return result, nil
}

// serveAct is the HTTP tool: the arguments are the body, the identity in
// Carmy's headers.
func (l *ledger) serveAct(w http.ResponseWriter, r *http.Request) {
	var a actArgs
	if err := json.NewDecoder(r.Body).Decode(&a); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	cut := func() { hangUp(w) }
	result, err := l.act(r.Context(), a, r.Header.Get("Carmy-Request-Id"), r.Header.Get("Carmy-Execution-Id"), "http", cut)
	if err != nil {
		return // cut, or the request was cancelled
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(result)
}

// serveProbe answers the result of the effect of request_id, or 404.
func (l *ledger) serveProbe(w http.ResponseWriter, r *http.Request) {
	result, ok := l.effect(r.PathValue("request_id"))
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(result)
}

// hangUp closes the connection under w with no answer.
func hangUp(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	conn.Close()
}

// cutter serves /mcp; a tools/call of act in mode cut or cutbefore is run
// here, and its connection cut, since the SDK's handler cannot hang up.
type cutter struct {
	l    *ledger
	next http.Handler
}

func (c cutter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Name      string         `json:"name"`
			Arguments actArgs        `json:"arguments"`
			Meta      map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call" && msg.Params.Name == "act" &&
		(msg.Params.Arguments.Mode == "cut" || msg.Params.Arguments.Mode == "cutbefore") {
		rid, _ := msg.Params.Meta["carmy/request_id"].(string)
		exec, _ := msg.Params.Meta["carmy/execution_id"].(string)
		c.l.act(r.Context(), msg.Params.Arguments, rid, exec, "mcp-http", func() { hangUp(w) })
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	c.next.ServeHTTP(w, r)
}

// newMCPServer serves act and find; cut is how a stdio server dies
// mid-call (nil over HTTP, where cutter does it).
func newMCPServer(l *ledger, cut func(mode string)) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "guarantee-upstream", Version: "v1"}, nil)
	s.AddTool(&mcp.Tool{Name: "act", Description: "The guarantee suite's tool",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"mode":{"type":"string"},"ms":{"type":"integer"},"n":{}}}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a actArgs
			if err := json.Unmarshal(req.Params.Arguments, &a); err != nil {
				return nil, err
			}
			rid, _ := req.Params.Meta["carmy/request_id"].(string)
			exec, _ := req.Params.Meta["carmy/execution_id"].(string)
			var hang func()
			if cut != nil {
				hang = func() { cut(a.Mode) }
			}
			result, err := l.act(ctx, a, rid, exec, "mcp", hang)
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{StructuredContent: result, Content: []mcp.Content{&mcp.TextContent{Text: string(result)}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "find", Description: "The reconcile probe of act",
		InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct {
				RequestID string `json:"request_id"`
			}
			if err := json.Unmarshal(req.Params.Arguments, &a); err != nil {
				return nil, err
			}
			found := map[string]any{"found": false}
			if result, ok := l.effect(a.RequestID); ok {
				found = map[string]any{"found": true, "data": result}
			}
			return &mcp.CallToolResult{StructuredContent: found, Content: []mcp.Content{&mcp.TextContent{Text: "probed"}}}, nil
		})
	return s
}
