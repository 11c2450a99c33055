package engine

import (
	"bufio"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
)

// Bounds of DefaultMaxInflightBytes.
const (
	// inflightShare: the default bound is this fraction (1/n) of the
	// memory the process may use. A byte in flight is held several times
	// over (the request body, the decoded call, the result, the command
	// and its frame, the leader's copy), so 1/64 keeps a full bound to a
	// small part of memory.
	inflightShare = 64
	// MinDefaultInflightBytes and MaxDefaultInflightBytes clamp the
	// default: at least a dozen of the largest calls (1 MiB each by
	// default); and no more than a starved host moves through Raft well
	// within a call's wait for its outcome. With 3 busy processes beside 3
	// nodes on 2 cores, a cluster recorded about 2–4 MB of results a
	// second: 64 MiB in flight is then 15–30 s of queue, inside the store
	// timeout plus a tool's default timeout (40 s); 144 MiB was not.
	MinDefaultInflightBytes = 16 << 20
	MaxDefaultInflightBytes = 64 << 20
)

// DefaultMaxInflightBytes is the default of Config.MaxInflightBytes: a
// sixty-fourth of the memory the process may use, between
// MinDefaultInflightBytes and MaxDefaultInflightBytes. The memory it may
// use is the Go memory limit when one is set (GOMEMLIMIT,
// debug.SetMemoryLimit), else the cgroup's memory limit (cgroup v2
// memory.max, v1 memory.limit_in_bytes), else the host's memory
// (/proc/meminfo); with none of them known, the floor.
func DefaultMaxInflightBytes() int64 {
	defaultInflightOnce.Do(func() {
		defaultInflight = inflightFor(memoryAvailable())
	})
	return defaultInflight
}

var (
	defaultInflightOnce sync.Once
	defaultInflight     int64
)

// inflightFor is the default bound for a process that may use mem bytes
// (0: unknown).
func inflightFor(mem int64) int64 {
	if mem <= 0 {
		return MinDefaultInflightBytes
	}
	return min(MaxDefaultInflightBytes, max(MinDefaultInflightBytes, mem/inflightShare))
}

// memoryAvailable is the memory the process may use, 0 when unknown.
func memoryAvailable() int64 {
	if limit := debug.SetMemoryLimit(-1); limit > 0 && limit < math.MaxInt64 {
		return limit
	}
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// "max" (v2) or a huge value (v1) means no limit.
		if n, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64); err == nil && n > 0 && n < 1<<50 {
			return n
		}
	}
	return memTotal()
}

// memTotal is the host's memory from /proc/meminfo, 0 when unknown.
func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// MemTotal:       24684544 kB
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 && fields[0] == "MemTotal:" && fields[2] == "kB" {
			if kb, err := strconv.ParseInt(fields[1], 10, 64); err == nil {
				return kb << 10
			}
		}
	}
	return 0
}
