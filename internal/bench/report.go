package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// The result of `carmy bench`: a table, one JSON object (--json), and a
// comparison table of many JSON results (--table FILE).

// benchResult is what a run measured; its JSON is the --json output.
type benchResult struct {
	Label             string           `json:"label,omitempty"`
	Targets           []string         `json:"targets"`
	Mode              string           `json:"mode"`
	Tool              string           `json:"tool"`
	Transport         string           `json:"transport"`
	MCPVersion        string           `json:"mcp_version,omitempty"` // with transport mcp
	ArgsSize          int              `json:"args_size"`
	Clients           int              `json:"clients"`
	DurationS         float64          `json:"duration_s"`
	Calls             int64            `json:"calls"`
	Errors            int64            `json:"errors"`
	CallsPerSec       float64          `json:"calls_per_sec"`
	LatencyMS         benchLatencyMS   `json:"latency_ms"`
	Outcomes          map[string]int64 `json:"outcomes"`
	LogWritesPerCall  *float64         `json:"log_writes_per_call,omitempty"`
	LogEntriesPerCall *float64         `json:"log_entries_per_call,omitempty"`
	Interrupted       bool             `json:"interrupted,omitempty"`
	// LongestStallMS is the longest stretch of the measurement without a
	// successful answer (from its start, or one answer, to the next, or
	// to its end), from StallFrom to StallTo (RFC 3339, UTC).
	LongestStallMS float64 `json:"longest_stall_ms,omitempty"`
	StallFrom      string  `json:"stall_from,omitempty"`
	StallTo        string  `json:"stall_to,omitempty"`
}

// benchLatencyMS is latencyStats in milliseconds.
type benchLatencyMS struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
}

// result gathers what the clients measured.
func (d *benchDriver) result(clients []*benchClient, elapsed time.Duration, interrupted bool) *benchResult {
	o := d.opts
	res := &benchResult{
		Label: o.Label, Targets: o.Targets, Mode: o.Mode, Tool: o.Tool, Transport: o.Transport, ArgsSize: o.ArgsSize,
		Clients: o.Clients, DurationS: round(elapsed.Seconds(), 3), Outcomes: map[string]int64{},
		Interrupted: interrupted,
	}
	if o.Transport == transportMCP {
		res.MCPVersion = o.MCPVersion
	}
	parts := make([][]time.Duration, len(clients))
	for i, c := range clients {
		parts[i] = c.latencies
		for name, n := range c.outcomes {
			res.Outcomes[name] += n
			res.Calls += n
			if isError(o.Mode, name) {
				res.Errors += n
			}
		}
	}
	if elapsed > 0 {
		res.CallsPerSec = round(float64(res.Calls)/elapsed.Seconds(), 1)
	}
	st := computeLatency(mergeLatencies(parts))
	ms := func(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 3) }
	res.LatencyMS = benchLatencyMS{Mean: ms(st.Mean), P50: ms(st.P50), P90: ms(st.P90), P99: ms(st.P99), P999: ms(st.P999), Max: ms(st.Max)}
	return res
}

// round rounds x to n decimals.
func round(x float64, n int) float64 {
	p := math.Pow10(n)
	return math.Round(x*p) / p
}

// writeResultJSON writes res as one JSON object on one line.
func writeResultJSON(w io.Writer, res *benchResult) error {
	raw, err := json.Marshal(res)
	if err != nil {
		return err
	}
	_, err = w.Write(append(raw, '\n'))
	return err
}

// printResult writes res as a table.
func printResult(w io.Writer, res *benchResult) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%-10s%s\n", "targets", strings.Join(res.Targets, ","))
	if res.Transport != "" && res.Transport != transportHTTP {
		fmt.Fprintf(&b, "%-10s%s\n", "transport", strings.TrimSpace(res.Transport+" "+res.MCPVersion))
	}
	fmt.Fprintf(&b, "%-10s%s   clients %d   duration %.1fs   calls %d   errors %d", "mode",
		res.Mode, res.Clients, res.DurationS, res.Calls, res.Errors)
	if res.Interrupted {
		b.WriteString("   (interrupted)")
	}
	b.WriteByte('\n')
	fmt.Fprintf(&b, "%-10s%.1f\n", "calls/s", res.CallsPerSec)
	if res.Calls > 0 {
		l := res.LatencyMS
		fmt.Fprintf(&b, "%-10smean %s  p50 %s  p90 %s  p99 %s  p99.9 %s  max %s\n", "latency",
			fmtMS(l.Mean), fmtMS(l.P50), fmtMS(l.P90), fmtMS(l.P99), fmtMS(l.P999), fmtMS(l.Max))
	}
	if res.LongestStallMS > 0 {
		fmt.Fprintf(&b, "%-10s%s   (no successful answer from %s to %s)\n", "stall", fmtMS(res.LongestStallMS), res.StallFrom, res.StallTo)
	}
	if res.LogWritesPerCall != nil {
		fmt.Fprintf(&b, "log writes per call   %.2f   (per node: appends to the Raft log, each synced once)\n", *res.LogWritesPerCall)
	}
	if res.LogEntriesPerCall != nil {
		fmt.Fprintf(&b, "log entries per call  %.2f   (per node)\n", *res.LogEntriesPerCall)
	}
	if len(res.Outcomes) > 0 {
		b.WriteByte('\n')
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "outcome\tcount\tshare")
		for _, name := range outcomeOrder(res.Outcomes) {
			n := res.Outcomes[name]
			fmt.Fprintf(tw, "%s\t%d\t%.1f%%\n", name, n, 100*float64(n)/float64(res.Calls))
		}
		tw.Flush()
	}
	_, err := w.Write(b.Bytes())
	return err
}

// outcomeOrder lists ran and replayed first, then the errors, most
// frequent first.
func outcomeOrder(outcomes map[string]int64) []string {
	names := make([]string, 0, len(outcomes))
	for name := range outcomes {
		names = append(names, name)
	}
	rank := func(name string) int {
		switch name {
		case outcomeRan:
			return 0
		case outcomeReplayed:
			return 1
		}
		return 2
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := names[i], names[j]
		if rank(a) != rank(b) {
			return rank(a) < rank(b)
		}
		if outcomes[a] != outcomes[b] {
			return outcomes[a] > outcomes[b]
		}
		return a < b
	})
	return names
}

// fmtMS prints a latency in milliseconds with three significant digits or
// so.
func fmtMS(ms float64) string {
	switch {
	case ms < 1:
		return strconv.FormatFloat(ms, 'f', 3, 64) + "ms"
	case ms < 10:
		return strconv.FormatFloat(ms, 'f', 2, 64) + "ms"
	default:
		return strconv.FormatFloat(ms, 'f', 1, 64) + "ms"
	}
}

// printComparisonFile prints the --json results in path (one per line)
// as one table, a row per run.
func printComparisonFile(w io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var results []benchResult
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var r benchResult
		if err := json.Unmarshal(line, &r); err != nil {
			return fmt.Errorf("%s:%d: not a carmy bench --json result: %v", path, n, err)
		}
		results = append(results, r)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	return printComparison(w, results)
}

// printComparison prints results as one table.
func printComparison(w io.Writer, results []benchResult) error {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "cluster\tmode\tclients\tcalls/s\tp50\tp99\tp99.9\terrors\tlog writes/call")
	for _, r := range results {
		writes := "-"
		if r.LogWritesPerCall != nil {
			writes = strconv.FormatFloat(*r.LogWritesPerCall, 'f', 2, 64)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%s\t%s\t%s\t%d\t%s\n", labelOrDash(r.Label), r.Mode, r.Clients, r.CallsPerSec,
			fmtMS(r.LatencyMS.P50), fmtMS(r.LatencyMS.P99), fmtMS(r.LatencyMS.P999), r.Errors, writes)
	}
	tw.Flush()
	_, err := w.Write(b.Bytes())
	return err
}

// labelOrDash is a run's label, or "-" for a run without one.
func labelOrDash(label string) string {
	if label == "" {
		return "-"
	}
	return label
}
