//go:build race

package ipalloc

// raceEnabled shortens the long randomised tests under the race detector,
// which slows map-heavy code (the model) more than tenfold.
const raceEnabled = true
