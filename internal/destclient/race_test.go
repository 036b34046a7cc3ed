//go:build race

package destclient

// raceEnabled: the race detector's sync.Pool drops items at random, so allocation counts
// that rely on a pool are not checked under it.
const raceEnabled = true
