//go:build race

package ipam_test

// raceOn: the race detector is on (its runs are about ten times slower).
const raceOn = true
