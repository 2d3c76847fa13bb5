package race_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// moduleRoot is the module's directory, seen from this package's.
const moduleRoot = "../.."

// TestEveryRaceSkippedTestRunsInMakeTest holds the contract this package
// exists for: a test that skips under -race runs in a step of make test
// without it. A test that skips under -race and that no other step runs
// is a test CI never runs; the check reads the steps as make expands
// them (make -n test) and every test function that skips when Enabled
// is true, or calls a helper of its package that does.
func TestEveryRaceSkippedTestRunsInMakeTest(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	cmd := exec.Command("make", "-s", "-n", "-C", moduleRoot, "test")
	// (Under make test, the parent's flags — a jobserver, -k, -n — are not
	// this make's.)
	cmd.Env = append(os.Environ(), "MAKEFLAGS=", "MFLAGS=", "MAKELEVEL=")
	out, err := cmd.Output()
	require.NoError(t, err)
	steps := goTestSteps(t, string(out))
	require.NotEmpty(t, steps, "make -n test shows no go test step:\n%s", out)

	skipped := raceSkippedTests(t)
	require.NotEmpty(t, skipped, "found no test that skips under -race: the scan is broken")
	var missed []string
	for _, st := range skipped {
		ran := false
		for _, s := range steps {
			if !s.race && s.covers(st.pkg) && (s.run == nil || s.run.MatchString(st.name)) {
				ran = true
				break
			}
		}
		if !ran {
			missed = append(missed, st.pkg+"."+st.name)
		}
	}
	slices.Sort(missed)
	require.Empty(t, missed, "these tests skip under -race, and no step of make test runs them without it")
}

// TestStepsParse checks the reading of make's lines that the check above
// relies on.
func TestStepsParse(t *testing.T) {
	steps := goTestSteps(t, "go vet ./...\n"+
		"go test -race -count=1 ./...\n"+
		"go test -p 1 -count=1 -run '^TestHostileClients$' ./cmd/brownoutd ./shop/...\n")
	require.Len(t, steps, 2)
	require.True(t, steps[0].race)
	require.True(t, steps[0].covers("./sim"))
	require.False(t, steps[1].race)
	require.True(t, steps[1].covers("./cmd/brownoutd"))
	require.True(t, steps[1].covers("./shop/sale"))
	require.False(t, steps[1].covers("./cmd/brownout-lab"))
	require.True(t, steps[1].run.MatchString("TestHostileClients"))
	require.False(t, steps[1].run.MatchString("TestHostileClientsToo"))
}

type step struct {
	race bool
	run  *regexp.Regexp // nil: every test
	pkgs []string
}

// covers reports whether the step's package patterns include pkg (a
// "./dir" path).
func (s step) covers(pkg string) bool {
	for _, p := range s.pkgs {
		if p == pkg {
			return true
		}
		if base, ok := strings.CutSuffix(p, "/..."); ok && (pkg == base || strings.HasPrefix(pkg, base+"/") || base == ".") {
			return true
		}
	}
	return false
}

// goTestSteps reads the go test commands out of make -n's lines.
func goTestSteps(t *testing.T, out string) []step {
	t.Helper()
	var steps []step
	for line := range strings.SplitSeq(out, "\n") {
		w := shellWords(line)
		if len(w) < 2 || filepath.Base(w[0]) != "go" || w[1] != "test" {
			continue
		}
		var s step
		for i := 2; i < len(w); i++ {
			a := w[i]
			switch {
			case a == "-race":
				s.race = true
			case a == "-run" && i+1 < len(w):
				i++
				s.run = regexp.MustCompile(w[i])
			case strings.HasPrefix(a, "-run="):
				s.run = regexp.MustCompile(strings.TrimPrefix(a, "-run="))
			case a == "-p" || a == "-tags" || a == "-timeout" || a == "-bench" || a == "-benchtime":
				i++ // the flag's value
			case strings.HasPrefix(a, "-"):
			default:
				s.pkgs = append(s.pkgs, a)
			}
		}
		steps = append(steps, s)
	}
	return steps
}

// shellWords splits a command line on blanks, keeping single- and
// double-quoted words whole (what make -n prints; no escapes).
func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(c)
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ' || c == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

type skippedTest struct{ pkg, name string }

// raceSkippedTests finds the test functions that skip when race.Enabled,
// or call a function of their package that does.
func raceSkippedTests(t *testing.T) []skippedTest {
	t.Helper()
	byDir := map[string][]*ast.File{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(moduleRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") && path != moduleRoot {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		byDir[filepath.Dir(path)] = append(byDir[filepath.Dir(path)], f)
		return nil
	})
	require.NoError(t, err)

	// Helpers first: a package's (non-test) functions that read it.
	var found []skippedTest
	for dir, files := range byDir {
		helpers := map[string]bool{}
		for _, f := range files {
			for _, d := range f.Decls {
				if fn, ok := d.(*ast.FuncDecl); ok && fn.Body != nil && !isTest(fn) && skipsWhenEnabled(fn.Body) {
					helpers[fn.Name.Name] = true
				}
			}
		}
		rel, err := filepath.Rel(moduleRoot, dir)
		require.NoError(t, err)
		pkg := "./" + filepath.ToSlash(rel)
		for _, f := range files {
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Body == nil || !isTest(fn) {
					continue
				}
				if skipsWhenEnabled(fn.Body) || callsAny(fn.Body, helpers) {
					found = append(found, skippedTest{pkg, fn.Name.Name})
				}
			}
		}
	}
	return found
}

func isTest(fn *ast.FuncDecl) bool {
	return fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test") && fn.Name.Name != "TestMain"
}

// skipsWhenEnabled reports whether n holds an if on race.Enabled whose
// body skips the test (a test that only runs less under it still runs).
func skipsWhenEnabled(n ast.Node) bool {
	seen := false
	ast.Inspect(n, func(n ast.Node) bool {
		if is, ok := n.(*ast.IfStmt); ok && readsEnabled(is.Cond) && callsSkip(is.Body) {
			seen = true
		}
		return !seen
	})
	return seen
}

func readsEnabled(n ast.Node) bool {
	seen := false
	ast.Inspect(n, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Enabled" {
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "race" {
				seen = true
			}
		}
		return !seen
	})
	return seen
}

func callsSkip(n ast.Node) bool {
	seen := false
	ast.Inspect(n, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if sel, ok := c.Fun.(*ast.SelectorExpr); ok && strings.HasPrefix(sel.Sel.Name, "Skip") {
				seen = true
			}
		}
		return !seen
	})
	return seen
}

func callsAny(n ast.Node, names map[string]bool) bool {
	seen := false
	ast.Inspect(n, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if id, ok := c.Fun.(*ast.Ident); ok && names[id.Name] {
				seen = true
			}
		}
		return !seen
	})
	return seen
}
