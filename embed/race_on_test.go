//go:build race

package embed_test

// raceScale divides the sizes of the tests that move megabytes per call:
// the race detector makes byte-level work (JSON, JCS) some twenty times
// slower, and the tests' logic does not depend on the scale.
const raceScale = 8
