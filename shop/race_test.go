//go:build race

package shop

const raceEnabled = true
