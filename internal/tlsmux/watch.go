package tlsmux

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"
)

// ReloadEvery is how often a Watched value checks its files for changes.
const ReloadEvery = 5 * time.Second

// Watched is a value loaded from files and loaded again when any of them
// changes (a newer or older modification time), checked at most every
// ReloadEvery, so that renewed certificates are served without a restart.
// A load that fails keeps the last good value; it is logged as a warning
// (once per change of the files) so that a broken renewal is seen before
// the certificate in use expires.
type Watched[T any] struct {
	files []string
	load  func() (T, error)
	log   *slog.Logger

	mu      sync.Mutex
	checked time.Time
	mods    []time.Time // of the files the value was loaded from
	failed  []time.Time // of the files whose load failed last
	v       T
}

// Watch loads the value once from files; it fails when that load does.
// Later failures are logged to log (nil: not logged).
func Watch[T any](log *slog.Logger, load func() (T, error), files ...string) (*Watched[T], error) {
	w := &Watched[T]{files: files, load: load, log: log}
	if err := w.reload(true); err != nil {
		return nil, err
	}
	w.checked = time.Now()
	return w, nil
}

// reload loads again if a file changed (or if force).
func (w *Watched[T]) reload(force bool) error {
	mods := make([]time.Time, len(w.files))
	for i, f := range w.files {
		st, err := os.Stat(f)
		if err != nil {
			return fmt.Errorf("tls: %w", err)
		}
		mods[i] = st.ModTime()
	}
	if !force && (slices.Equal(mods, w.mods) || slices.Equal(mods, w.failed)) {
		return nil
	}
	v, err := w.load()
	if err != nil {
		w.failed = mods
		return err
	}
	w.v, w.mods, w.failed = v, mods, nil
	return nil
}

// Current returns the value, loading it again first when ReloadEvery has
// passed since the last check and a file changed.
func (w *Watched[T]) Current() T {
	w.mu.Lock()
	defer w.mu.Unlock()
	if time.Since(w.checked) >= ReloadEvery {
		w.checked = time.Now()
		if err := w.reload(false); err != nil && w.log != nil {
			w.log.Warn("reloading TLS files failed; still serving the last good ones",
				slog.Any("files", w.files), slog.Any("err", err))
		}
	}
	return w.v
}

// Expire makes the next Current check the files at once (for a reload on
// demand, and for tests).
func (w *Watched[T]) Expire() {
	w.mu.Lock()
	w.checked = time.Time{}
	w.mu.Unlock()
}
