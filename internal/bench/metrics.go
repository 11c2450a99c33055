package bench

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// `carmy bench --metrics`: scrape GET /metrics (Prometheus text format) of
// every target before and after a run, for counters per call.

// Counters whose deltas `carmy bench` reports per call.
const (
	metricLogWrites  = "carmy_raft_log_writes_total"
	metricLogEntries = "carmy_raft_log_entries_total"
)

// metricsScrapeTimeout bounds one scrape (or --timeout, if lower).
const metricsScrapeTimeout = 5 * time.Second

// promSample sums, per metric name, the values of its series.
type promSample map[string]float64

// parsePromText reads the Prometheus text exposition format: one
// `name{labels} value [timestamp]` per line; comments (# HELP, # TYPE, …)
// and blank lines are skipped, and so is any line it cannot read. The
// values of a metric's series (one per label set) are summed.
func parsePromText(r io.Reader) promSample {
	out := promSample{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := parsePromLine(sc.Text())
		if ok {
			out[name] += value
		}
	}
	return out
}

// parsePromLine reads one sample line.
func parsePromLine(line string) (name string, value float64, ok bool) {
	line = strings.TrimSpace(line)
	if line == "" || line[0] == '#' {
		return "", 0, false
	}
	i := strings.IndexAny(line, "{ \t")
	if i <= 0 {
		return "", 0, false
	}
	name, rest := line[:i], line[i:]
	if rest[0] == '{' {
		end := labelsEnd(rest)
		if end < 0 {
			return "", 0, false
		}
		rest = rest[end+1:]
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 || len(fields) > 2 {
		return "", 0, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return "", 0, false
	}
	return name, v, true
}

// labelsEnd returns the index of the '}' closing the label set that s
// starts with, skipping quoted label values (which may hold '}' and
// escaped quotes), or -1.
func labelsEnd(s string) int {
	inQuote := false
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case inQuote && c == '\\':
			i++ // the escaped character
		case c == '"':
			inQuote = !inQuote
		case !inQuote && c == '}':
			return i
		}
	}
	return -1
}

// scrapeMetrics fetches GET /metrics of every target at once; a target
// that does not answer 200 has a nil sample. It never fails the run.
func scrapeMetrics(ctx context.Context, client *http.Client, bases []string, timeout time.Duration) []promSample {
	timeout = min(timeout, metricsScrapeTimeout)
	out := make([]promSample, len(bases))
	var wg sync.WaitGroup
	for i, base := range bases {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
			if err != nil {
				return
			}
			resp, err := client.Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			raw, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
			if err != nil || resp.StatusCode != http.StatusOK {
				return
			}
			out[i] = parsePromText(bytes.NewReader(raw))
		})
	}
	wg.Wait()
	return out
}

// counterDelta averages, over the targets scraped both before and after
// that expose the counter, how much it grew: a per-node figure, since
// every node of a cluster writes the whole log. ok is false when no target
// exposes it, or when it went down somewhere (a restarted node).
func counterDelta(before, after []promSample, name string) (delta float64, ok bool) {
	nodes := 0
	for i := range before {
		if i >= len(after) || before[i] == nil || after[i] == nil {
			continue
		}
		b, okB := before[i][name]
		a, okA := after[i][name]
		if !okB || !okA {
			continue
		}
		if a < b {
			return 0, false
		}
		delta += a - b
		nodes++
	}
	if nodes == 0 {
		return 0, false
	}
	return delta / float64(nodes), true
}
