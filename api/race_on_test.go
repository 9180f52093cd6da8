//go:build race

package api

// raceEnabled: the race detector is on (its runtime allocates more, and
// sync.Pool drops objects at random).
const raceEnabled = true
