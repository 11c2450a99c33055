package robustness

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Verdict of a history check.
type Verdict struct {
	OK             bool
	Keys           int      // identities checked
	Failed         []string // identities whose history is not linearizable; " (check timed out)" follows those whose check ran out of time
	Visualizations []string // paths of the HTML files written for failures
}

// timedOut marks a Verdict.Failed entry whose check did not finish.
const timedOut = " (check timed out)"

// CheckHistory checks each identity's ops for linearizability against the
// model, within timeout per identity (0: no limit). An identity whose check
// is illegal or runs out of time fails the verdict; for each, porcupine's
// visualisation is written to <dir>/linearizability-<sanitised key>.html
// (dir is created if need be) and its path returned. Ops of KindUnknown
// never return. An op the model cannot interpret (see Op) is an error, and
// so is a visualisation that cannot be written; the verdict so far is
// returned with it.
func CheckHistory(ops []Op, dir string, timeout time.Duration) (Verdict, error) {
	byKey := make(map[string][]Op)
	for i, op := range ops {
		if err := op.validate(); err != nil {
			return Verdict{}, fmt.Errorf("robustness: op %d (client %d, key %q): %w", i, op.Client, op.Key, err)
		}
		byKey[op.Key] = append(byKey[op.Key], op)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)

	never := neverReturns(ops)
	model := newModel()
	v := Verdict{OK: true, Keys: len(keys)}
	for _, key := range keys {
		res, info := porcupine.CheckOperationsVerbose(model, toOperations(byKey[key], never), timeout)
		if res == porcupine.Ok {
			continue
		}
		v.OK = false
		name := key
		if res == porcupine.Unknown {
			name += timedOut
		}
		v.Failed = append(v.Failed, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return v, fmt.Errorf("robustness: visualisation dir: %w", err)
		}
		path := filepath.Join(dir, "linearizability-"+sanitise(key)+".html")
		if err := porcupine.VisualizePath(model, info, path); err != nil {
			return v, fmt.Errorf("robustness: visualising key %q: %w", key, err)
		}
		v.Visualizations = append(v.Visualizations, path)
	}
	return v, nil
}

// neverReturns is a time after every call and answer of ops: the return
// time given to ops that never returned.
func neverReturns(ops []Op) int64 {
	var last int64
	for _, op := range ops {
		last = max(last, op.Call)
		if op.Kind != KindUnknown {
			last = max(last, op.Return)
		}
	}
	if last == math.MaxInt64 {
		return last
	}
	return last + 1
}

// toOperations converts one identity's ops for porcupine. ClientId is a
// visualisation lane, not Op.Client (which the description shows): ops that
// overlap in time, even of one client (after an op that never returned),
// get different lanes, so that no two boxes of a row overlap.
func toOperations(ops []Op, never int64) []porcupine.Operation {
	ops = slices.Clone(ops)
	slices.SortStableFunc(ops, func(a, b Op) int { return cmp.Compare(a.Call, b.Call) })
	var laneEnd []int64
	out := make([]porcupine.Operation, len(ops))
	for i, op := range ops {
		ret := op.Return
		if op.Kind == KindUnknown {
			ret = never
		}
		lane := slices.IndexFunc(laneEnd, func(end int64) bool { return end < op.Call })
		if lane < 0 {
			lane = len(laneEnd)
			laneEnd = append(laneEnd, 0)
		}
		laneEnd[lane] = ret
		out[i] = porcupine.Operation{ClientId: lane, Input: op, Call: op.Call, Return: ret}
	}
	return out
}

// sanitise makes a file name part of key: letters, digits, '.', '_' and
// '-' are kept, anything else becomes '_', at most 64 of them; a key that
// had to change gets a hash of itself appended, so that keys stay apart.
func sanitise(key string) string {
	var b strings.Builder
	for _, r := range key {
		if b.Len() == 64 {
			break
		}
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-", r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	if b.String() == key && key != "" {
		return key
	}
	h := fnv.New32a()
	h.Write([]byte(key))
	return fmt.Sprintf("%s-%08x", b.String(), h.Sum32())
}
