package nodeauth

import (
	"log/slog"
	"sync"
	"time"
)

// refusalLogEvery bounds the refusal log: at most one line per interval,
// with the count of refusals left unlogged since the last one.
const refusalLogEvery = 10 * time.Second

// Refusals logs refused peers (a failed Raft handshake, a certificate
// without the node role) at WARN, rate-limited: whoever can reach a port
// can make refusals as fast as it connects, and must not be able to fill
// the log. Safe for concurrent use; a nil *Refusals logs nothing.
type Refusals struct {
	log *slog.Logger

	mu         sync.Mutex
	last       time.Time // when the last line was logged
	suppressed int       // refusals since then, not logged
}

func NewRefusals(log *slog.Logger) *Refusals { return &Refusals{log: log} }

// refused logs one refusal (what was refused, why and from where), or
// counts it when a line was logged less than refusalLogEvery ago.
func (r *Refusals) Refused(what, remote string, err error) {
	if r == nil || r.log == nil {
		return
	}
	r.mu.Lock()
	now := time.Now()
	if !r.last.IsZero() && now.Sub(r.last) < refusalLogEvery {
		r.suppressed++
		r.mu.Unlock()
		return
	}
	suppressed := r.suppressed
	r.last, r.suppressed = now, 0
	r.mu.Unlock()
	attrs := []any{slog.Any("err", err), slog.Int("refusals_not_logged", suppressed)}
	if remote != "" {
		attrs = append([]any{slog.String("remote_addr", remote)}, attrs...)
	}
	r.log.Warn("refused a peer: "+what, attrs...)
}
