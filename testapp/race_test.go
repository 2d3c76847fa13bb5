//go:build race

package testapp

const raceEnabled = true
