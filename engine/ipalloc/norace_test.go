//go:build !race

package ipalloc

// raceEnabled shortens the long randomised tests under the race detector.
const raceEnabled = false
