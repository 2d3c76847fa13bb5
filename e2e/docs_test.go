package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// docCommand is one command of a shell block in the docs.
type docCommand struct {
	file string
	line int
	args []string // after "go run ./cmd/NAME" or "make": NAME first
}

var goRun = regexp.MustCompile(`^go run \./cmd/([a-z-]+)(.*)$`)

// docCommands returns the `go run ./cmd/…` and `make …` lines of the
// shell blocks of the README and docs/, without their comments; lines
// with placeholders (…, alternatives a|b, [optional]) are left out.
func docCommands(t *testing.T) []docCommand {
	files, err := filepath.Glob("../docs/*.md")
	require.NoError(t, err)
	var out []docCommand
	for _, f := range append(files, "../README.md") {
		fh, err := os.Open(f)
		require.NoError(t, err)
		sc := bufio.NewScanner(fh)
		in, n := false, 0
		for sc.Scan() {
			n++
			l := sc.Text()
			if strings.HasPrefix(l, "```") {
				in = strings.HasPrefix(l, "```sh")
				continue
			}
			if !in {
				continue
			}
			if i := strings.Index(l, " #"); i >= 0 {
				l = l[:i]
			}
			l = strings.TrimSpace(l)
			if strings.ContainsAny(l, "…|[") {
				continue
			}
			switch m := goRun.FindStringSubmatch(l); {
			case m != nil:
				out = append(out, docCommand{f, n, append([]string{m[1]}, strings.Fields(m[2])...)})
			case strings.HasPrefix(l, "make "):
				out = append(out, docCommand{f, n, strings.Fields(l)})
			}
		}
		fh.Close()
		require.NoError(t, sc.Err())
	}
	return out
}

// TestDocCommands keeps the docs' commands true without running the long
// ones: every make target exists, every command's flags parse (the command
// is run with --help appended, which exits 0 only if every flag before it
// parsed), a seed simulator runs, and every configuration named passes
// check-config.
func TestDocCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the commands")
	}
	cmds := docCommands(t)
	require.Greater(t, len(cmds), 10, "the docs' commands were found")
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", dir+"/", "../cmd/...")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, c := range cmds {
		where := c.file + ":" + strconv.Itoa(c.line)
		if c.args[0] == "make" {
			cmd := exec.Command("make", append([]string{"-n"}, c.args[1:]...)...)
			cmd.Dir = ".."
			out, err := cmd.CombinedOutput()
			assert.NoError(t, err, "%s: make %v: %s", where, c.args[1:], out)
			continue
		}
		bin := filepath.Join(dir, c.args[0])
		args := c.args[1:]
		for i, a := range args { // paths are the repository root's
			if strings.Contains(a, "/") && !strings.Contains(a, "://") && !strings.HasPrefix(a, "/") {
				if _, err := os.Stat(filepath.Join("..", a)); err == nil {
					args[i] = filepath.Join("..", a)
				}
			}
		}
		switch {
		case len(args) > 0 && args[0] == "check-config":
			if len(args) == 2 {
				if _, err := os.Stat(args[1]); err != nil {
					continue // a placeholder (my.yaml)
				}
			}
		case len(args) > 0 && args[0] == "seed":
			// Runs in a moment: the source's output.
		default:
			args = append(args, "--help")
		}
		for i, a := range args {
			if a == "--config" && i+1 < len(args) {
				out, err := exec.Command(filepath.Join(dir, "brownoutd"), "check-config", args[i+1]).CombinedOutput()
				assert.NoError(t, err, "%s: check-config %s: %s", where, args[i+1], out)
			}
		}
		out, err := exec.Command(bin, args...).CombinedOutput()
		assert.NoError(t, err, "%s: %s %v: %s", where, c.args[0], args, out)
	}
}
