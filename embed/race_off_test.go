//go:build !race

package embed_test

// raceScale: see race_on_test.go.
const raceScale = 1
