//go:build !race

package destclient

const raceEnabled = false
