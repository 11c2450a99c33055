package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/carmyhq/carmy/store/postgres"
)

// Config is what Run measures.
type Config struct {
	DSN      string
	Schema   string
	Pools    int // as that many nodes: each pool writes its own rounds
	Clients  int // callers, spread round-robin over the pools
	Duration time.Duration
	Warmup   time.Duration
}

func (c Config) validate() error {
	switch {
	case c.DSN == "":
		return errors.New("no -dsn (or CARMY_STORE)")
	case c.Schema == "":
		return errors.New("no -schema")
	case c.Pools < 1 || c.Pools > 16:
		return fmt.Errorf("-pools %d, want 1 to 16", c.Pools)
	case c.Clients < 1 || c.Clients > 4096:
		return fmt.Errorf("-clients %d, want 1 to 4096", c.Clients)
	case c.Duration <= 0 || c.Warmup < 0:
		return fmt.Errorf("-duration %s and -warmup %s: want a positive duration and no negative warmup", c.Duration, c.Warmup)
	}
	return nil
}

// Result is what Run measured: the calls (both writes committed) finished
// within Duration after Warmup, and the rounds that wrote them.
type Result struct {
	Pools       int     `json:"pools"`
	Clients     int     `json:"clients"`
	Seconds     float64 `json:"seconds"`
	Calls       int64   `json:"calls"`
	Rounds      int64   `json:"rounds"`
	PerRound    float64 `json:"writes_per_round"` // writes (two a call) per round
	CallsPerSec float64 `json:"calls_per_sec"`
}

// Run makes the tables in cfg.Schema (store/postgres, so they are the
// fleet's), then runs cfg.Clients callers, each doing calls one after the
// other (a fresh identity's insert, then its update, each through its
// pool's rounds), for cfg.Warmup and cfg.Duration. Any failed write ends
// the run with its error: the ceiling is of calls that succeed.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	st, err := postgres.Open(ctx, cfg.DSN, postgres.Config{Schema: cfg.Schema, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return Result{}, fmt.Errorf("making the tables: %w", err)
	}
	st.Close()
	q := newQueries(cfg.Schema)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		wg      sync.WaitGroup
		pools   []*round
		counted atomic.Bool
		calls   atomic.Int64
	)
	for i := range cfg.Pools {
		pc, err := pgxpool.ParseConfig(cfg.DSN)
		if err != nil {
			return Result{}, fmt.Errorf("dsn: %w", err)
		}
		// The plan settings of the store's rounds, per connection here.
		pc.ConnConfig.RuntimeParams["jit"] = "off"
		pc.ConnConfig.RuntimeParams["enable_hashjoin"] = "off"
		pc.ConnConfig.RuntimeParams["enable_mergejoin"] = "off"
		pool, err := pgxpool.NewWithConfig(ctx, pc)
		if err != nil {
			return Result{}, fmt.Errorf("pool %d: %w", i, err)
		}
		defer pool.Close()
		r := &round{pool: pool, q: q, node: "bare" + strconv.Itoa(i+1), in: make(chan *write, cfg.Clients)}
		pools = append(pools, r)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.loop(ctx); err != nil {
				cancel(err)
			}
		}()
	}
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	for c := range cfg.Clients {
		r := pools[c%len(pools)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				w := &write{principal: "bench", session: "s" + run + "-" + strconv.Itoa(c), request: strconv.Itoa(i), done: make(chan error, 1)}
				if err := r.do(ctx, w); err != nil {
					return
				}
				w.completed = true
				if err := r.do(ctx, w); err != nil {
					return
				}
				if counted.Load() {
					calls.Add(1)
				}
			}
		}()
	}
	timer := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	var (
		res    = Result{Pools: cfg.Pools, Clients: cfg.Clients}
		start  time.Time
		rounds int64
	)
	if timer(cfg.Warmup) {
		for _, r := range pools {
			rounds -= r.rounds.Load()
		}
		start = time.Now()
		counted.Store(true)
		timer(cfg.Duration)
		counted.Store(false)
		res.Seconds = time.Since(start).Seconds()
		res.Calls = calls.Load()
		for _, r := range pools {
			rounds += r.rounds.Load()
		}
	}
	cause := context.Cause(ctx)
	cancel(nil)
	wg.Wait()
	if cause != nil {
		return Result{}, cause
	}
	res.Rounds = rounds
	if rounds > 0 {
		res.PerRound = float64(2*res.Calls) / float64(rounds)
	}
	if res.Seconds > 0 {
		res.CallsPerSec = float64(res.Calls) / res.Seconds
	}
	return res, nil
}

// queries are the two writes, over arrays: a round's inserts, and its
// updates.
type queries struct{ insert, update string }

func newQueries(schema string) queries {
	t := func(name string) string { return pgx.Identifier{schema, "carmy_" + name}.Sanitize() }
	return queries{
		// $1 principals, $2 sessions, $3 request ids, $4 execution ids,
		// $5 start times, $6 the node.
		insert: `INSERT INTO ` + t("records") + ` (principal, session_id, request_id, execution_id, seq, tool, fingerprint, status, node_id, started_at)
SELECT u.p, u.s, u.r, u.e, nextval('` + t("seq") + `'), 'echo', 'fp', 'running', $6, u.t
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[]) AS u(p, s, r, e, t)
ON CONFLICT DO NOTHING`,
		// $1 principals, $2 sessions, $3 request ids, $4 finish times,
		// $5 results.
		update: `UPDATE ` + t("records") + ` AS x SET status = 'completed', finished_at = u.t, data = u.d
FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::bytea[]) AS u(p, s, r, t, d)
WHERE x.principal = u.p AND x.session_id = u.s AND x.request_id = u.r AND x.status = 'running'`,
	}
}
