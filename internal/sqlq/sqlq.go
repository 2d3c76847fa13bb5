// Package sqlq holds what the module's SQL code shares across dialects.
package sqlq

import (
	"strconv"
	"strings"
)

// Numbered rewrites ? placeholders as $1, $2, … for PostgreSQL.
func Numbered(s string) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
