//go:build race

package dimmer_test

const raceEnabled = true
