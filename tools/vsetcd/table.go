package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"
)

// tableCommand is vsetcd table: it prints the results of path (one JSON
// result a line) as pairs of runs, etcd's beside Carmy's.
func tableCommand(path string, w io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var results []result
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
		results = append(results, r)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return printTable(w, results)
}

// pairKey names one pair of runs: the same mode, callers and pair number.
type pairKey struct {
	mode    string
	clients int
	pair    int
}

// printTable prints one line per pair (in the order the pairs were run),
// then, for each mode and caller count, a line of medians: etcd's and
// Carmy's calls/s and the median of the pairs' ratios. A run whose other
// half is missing is shown with its ratio left out.
func printTable(w io.Writer, results []result) error {
	type pair struct{ etcd, carmy *result }
	type group struct {
		mode    string
		clients int
		keys    []pairKey
	}
	pairs := map[pairKey]*pair{}
	var groups []*group
	type groupKey struct {
		mode    string
		clients int
	}
	byGroup := map[groupKey]*group{}
	for i := range results {
		r := &results[i]
		k := pairKey{r.Mode, r.Clients, r.Pair}
		g := byGroup[groupKey{r.Mode, r.Clients}]
		if g == nil {
			g = &group{mode: r.Mode, clients: r.Clients}
			byGroup[groupKey{r.Mode, r.Clients}] = g
			groups = append(groups, g)
		}
		p := pairs[k]
		if p == nil {
			p = &pair{}
			pairs[k] = p
			g.keys = append(g.keys, k)
		}
		if r.System == "etcd" {
			p.etcd = r
		} else {
			p.carmy = r
		}
	}

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "mode\tcallers\tpair\tetcd calls/s\tp50\tp99\terrors\tcarmy calls/s\tp50\tp99\terrors\tcarmy/etcd")
	for _, g := range groups {
		var ratios, e, c []float64
		for _, k := range g.keys {
			p := pairs[k]
			ratio := "—"
			if p.etcd != nil && p.carmy != nil && p.etcd.CallsPerS > 0 {
				x := p.carmy.CallsPerS / p.etcd.CallsPerS
				ratios = append(ratios, x)
				ratio = strconv.FormatFloat(x, 'f', 2, 64)
			}
			if p.etcd != nil {
				e = append(e, p.etcd.CallsPerS)
			}
			if p.carmy != nil {
				c = append(c, p.carmy.CallsPerS)
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", g.mode, g.clients, k.pair, cells(p.etcd)+"\t"+cells(p.carmy), ratio)
		}
		ratio := "—"
		if len(ratios) > 0 {
			ratio = strconv.FormatFloat(median(ratios), 'f', 2, 64)
		}
		fmt.Fprintf(tw, "%s\t%d\tmedian\t%s\t\t\t\t%s\t\t\t\t%s\n", g.mode, g.clients, rate(e), rate(c), ratio)
	}
	return tw.Flush()
}

// cells are a run's calls/s, p50, p99 and errors, or dashes for none.
func cells(r *result) string {
	if r == nil {
		return "—\t—\t—\t—"
	}
	return fmt.Sprintf("%.1f\t%sms\t%sms\t%d", r.CallsPerS, ms(r.P50MS), ms(r.P99MS), r.Errors)
}

// rate is the median of calls/s figures, or a dash for none.
func rate(xs []float64) string {
	if len(xs) == 0 {
		return "—"
	}
	return strconv.FormatFloat(median(xs), 'f', 1, 64)
}

// ms prints milliseconds with three significant digits, as carmy bench does.
func ms(x float64) string {
	switch {
	case x >= 100:
		return strconv.FormatFloat(x, 'f', 1, 64)
	case x >= 10:
		return strconv.FormatFloat(x, 'f', 2, 64)
	default:
		return strconv.FormatFloat(x, 'f', 3, 64)
	}
}
