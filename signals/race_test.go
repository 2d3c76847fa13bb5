//go:build race

package signals

const raceEnabled = true
