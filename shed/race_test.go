//go:build race

package shed

const raceEnabled = true
