// Command ledger is the robustness harness's record of tool executions: the
// tool the workload calls is an HTTP tool whose upstream is this server, so
// every time a carmy node runs the tool body, one entry lands here, outside
// the cluster, before the tool answers. The harness reads the entries back
// to check that no identity ran twice and that every completed answer
// matches the execution that produced it.
//
// It runs in its own container on the test network (as "ledger"), never
// under a fault, and keeps entries in memory only: its life is one test run.
//
//	POST /exec      record one execution (the body is the tool's arguments;
//	                the Carmy-* and Idempotency-Key headers name it), wait
//	                the arguments' delay_ms, answer the entry; with
//	                "lose": true, the first request of its Idempotency-Key
//	                is not recorded and its connection is cut
//	GET  /entries   every entry so far, in arrival order
//	GET  /by-key/{key}
//	                the reconcile probe of the tool: 200 with the entry's
//	                result when an entry has that Idempotency-Key, else 404
//	GET  /probes    every probe answered so far, in arrival order
//	GET  /healthz   200
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", ":9000", "`host:port` to serve on")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	srv := &http.Server{Addr: *addr, Handler: newLedger().handler(), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutCtx)
	}()
	log.Info("ledger serving", slog.String("addr", *addr))
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("ledger stopped", slog.Any("err", err))
		os.Exit(1)
	}
}
