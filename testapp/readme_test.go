package testapp

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadmeSnippet keeps the README's embedded-mode snippet and serve
// (which this package compiles) the same code, and the options Embedded
// (which the harness runs) builds the Brownout with the snippet's.
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
	code, _, ok = strings.Cut(code, "\n// README:end")
	require.True(t, ok)
	assert.Equal(t, block, code, "README's snippet and testapp's serve differ")

	_, calls, ok := strings.Cut(string(src), "// README:calls\n")
	require.True(t, ok)
	calls, _, ok = strings.Cut(calls, "\t// README:calls-end")
	require.True(t, ok)
	assert.Contains(t, block, calls, "Embedded builds its Brownout as the README's snippet does")
}
