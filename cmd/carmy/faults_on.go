//go:build carmyfaults

package main

import (
	"log/slog"

	"github.com/carmyhq/carmy/internal/faultnet"
)

// faultsEnv turns the test fault layer on in a binary built with the
// carmyfaults tag.
const faultsEnv = "CARMY_TEST_FAULTS"

// newFaults returns the TEST-ONLY network fault layer when getenv says
// CARMY_TEST_FAULTS=1, else nil. This build (tag carmyfaults) is for
// fault-injection tests only; the default build has no fault layer at all.
func newFaults(getenv func(string) string, log *slog.Logger) faultLayer {
	if getenv(faultsEnv) != "1" {
		return nil
	}
	log.Warn("test fault layer active: any holder of the cluster key can cut this node off its peers; never run this in production",
		slog.String("env", faultsEnv), slog.String("control", faultsPath))
	return faultnet.NewWithLogger(log)
}
