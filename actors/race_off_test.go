//go:build !race

package actors

// raceEnabled reports a build with the race detector, under which sync.Pool
// drops a quarter of what it is given, on purpose.
const raceEnabled = false
