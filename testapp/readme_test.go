package testapp

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadmeSnippet keeps the README's embedded-mode snippet and Embedded
// (which the harness runs, and this package compiles) the same code.
func TestReadmeSnippet(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	_, after, ok := strings.Cut(string(readme), "## Protect a handler")
	require.True(t, ok, "README: no section \"Protect a handler\"")
	_, block, ok := strings.Cut(after, "```go\n")
	require.True(t, ok)
	block, _, ok = strings.Cut(block, "```")
	require.True(t, ok)

	src, err := os.ReadFile("stack.go")
	require.NoError(t, err)
	_, code, ok := strings.Cut(string(src), "// README:embedded\n")
	require.True(t, ok)
	code, _, ok = strings.Cut(code, "\t// README:end")
	require.True(t, ok)
	var lines []string
	for _, l := range strings.Split(code, "\n") {
		lines = append(lines, strings.TrimPrefix(l, "\t"))
	}
	assert.Equal(t, block, strings.Join(lines, "\n"), "README's snippet and testapp.Embedded differ")
}
