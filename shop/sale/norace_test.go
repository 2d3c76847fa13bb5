//go:build !race

package sale

const raceEnabled = false
