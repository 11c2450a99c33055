//go:build !race

package main

// raceScale: see race_on_test.go.
const raceScale = 1
