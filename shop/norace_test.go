//go:build !race

package shop

const raceEnabled = false
