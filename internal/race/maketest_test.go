package race_test

import (
	"bufio"
	"go/ast"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// moduleRoot is the module's directory, seen from this package's.
const moduleRoot = "../.."

// racePath is this package's import path.
const racePath = "github.com/brownout/brownout/internal/race"

// reachedFrom names, for each function outside the tests that skips under
// -race (a suite's part that only runs without it), the tests that reach
// it: the scan follows calls within a package's tests, not through other
// packages, so they are declared here. A new such function fails the check
// until it is.
var reachedFrom = map[string][]string{
	"./internal/hostile.Target.floods": {"./cmd/brownoutd.TestHostileClients", "./cmd/shop-demo.TestHostileClients"},
}

// TestEveryRaceSkippedTestRunsInMakeTest holds the contract this package
// exists for: a test that skips under -race runs in a step of make test
// without it. A test that skips under -race and that no other step runs
// is a test CI never runs. The check reads the steps as make expands
// them (make -n test) and finds the tests (and fuzz targets) that skip
// when Enabled is true: in an if on it (or an else of one on !Enabled), a
// switch case on it, or through a function of their package's tests that
// does (followed through such functions and methods), or through one of
// reachedFrom. What it does not follow: Enabled copied into another
// name first, a function value, a helper in another package not listed
// in reachedFrom.
func TestEveryRaceSkippedTestRunsInMakeTest(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	// GO=go: a GO given to the make that runs this test is in its
	// environment and would be this make's too.
	cmd := exec.Command("make", "-s", "-n", "-C", moduleRoot, "test", "GO=go")
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
		if !slices.ContainsFunc(steps, func(s step) bool { return s.runs(st) }) {
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
		"go test -p 1 -count=1 -run '^TestHostileClients$' ./cmd/brownoutd ./shop/...\n"+
		"go test -race=false -short -skip 'Slow' ./sim\n"+
		"go test -tags=brownout_procpin -skip=Slow -run=Lab ./sim\n"+
		"go test -run '^TestHostileClients$/^floods$' ./cmd/brownoutd\n")
	require.Len(t, steps, 5)
	assert.True(t, steps[0].race)
	assert.True(t, steps[0].covers("./sim"))
	assert.False(t, steps[1].race)
	assert.True(t, steps[1].covers("./cmd/brownoutd"))
	assert.True(t, steps[1].covers("./shop/sale"))
	assert.False(t, steps[1].covers("./cmd/brownout-lab"))
	assert.True(t, steps[1].runs(skippedTest{pkg: "./cmd/brownoutd", name: "TestHostileClients"}))
	assert.False(t, steps[1].runs(skippedTest{pkg: "./cmd/brownoutd", name: "TestHostileClientsToo"}))
	assert.False(t, steps[2].race)
	assert.False(t, steps[2].runs(skippedTest{pkg: "./sim", name: "TestLab"}), "-short: a lab test may skip on it too")
	lab := skippedTest{pkg: "./sim", name: "TestLab"}
	assert.True(t, steps[3].runs(lab))
	assert.False(t, steps[3].runs(skippedTest{pkg: "./sim", name: "TestLabSlow"}), "-skip")
	tagged := lab
	tagged.build = &constraint.TagExpr{Tag: "brownout_procpin"}
	assert.True(t, steps[3].runs(tagged))
	assert.False(t, steps[1].runs(skippedTest{pkg: "./shop/sale", name: "TestHostileClients", build: tagged.build}), "the file is not built without its tag")
	assert.True(t, steps[4].runs(skippedTest{pkg: "./cmd/brownoutd", name: "TestHostileClients"}), "a subtest of it")
	assert.Equal(t, "^a[/](b/c)", topLevel("^a[/](b/c)/d"))
	assert.Equal(t, `^a\/b`, topLevel(`^a\/b/c`))
}

type step struct {
	race, short bool
	run, skip   *regexp.Regexp // run nil: every test; skip nil: none
	tags        []string
	pkgs        []string
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

// runs reports whether the step runs st without the race detector. (A
// -run or -skip pattern is matched against the whole top-level name, as
// go test matches its first element.)
func (s step) runs(st skippedTest) bool {
	if s.race || s.short || !s.covers(st.pkg) {
		return false
	}
	if s.run != nil && !s.run.MatchString(st.name) || s.skip != nil && s.skip.MatchString(st.name) {
		return false
	}
	return st.build == nil || st.build.Eval(func(tag string) bool {
		switch {
		case tag == runtime.GOOS, tag == runtime.GOARCH, tag == "gc", tag == "cgo", strings.HasPrefix(tag, "go1."):
			return true
		case tag == "unix":
			return runtime.GOOS != "windows" && runtime.GOOS != "plan9" && runtime.GOOS != "js" && runtime.GOOS != "wasip1"
		}
		return slices.Contains(s.tags, tag)
	})
}

// flagTakesValue: go test's flags whose value may follow as the next word.
var flagTakesValue = map[string]bool{"run": true, "skip": true, "tags": true, "p": true, "timeout": true, "bench": true,
	"benchtime": true, "count": true, "cpu": true, "parallel": true, "o": true, "coverprofile": true, "exec": true, "fuzz": true, "fuzztime": true}

// goTestSteps reads the go test commands out of make -n's lines.
func goTestSteps(t *testing.T, out string) []step {
	t.Helper()
	var steps []step
	for line := range strings.SplitSeq(out, "\n") {
		w := shellWords(line)
		if len(w) < 2 || !strings.HasPrefix(filepath.Base(w[0]), "go") || w[1] != "test" {
			continue
		}
		var s step
		for i := 2; i < len(w); i++ {
			a := strings.TrimPrefix(w[i], "-") // (-flag and --flag alike)
			if a == w[i] {
				s.pkgs = append(s.pkgs, a)
				continue
			}
			a = strings.TrimPrefix(a, "-")
			name, val, hasVal := strings.Cut(a, "=")
			if flagTakesValue[name] && !hasVal && i+1 < len(w) {
				i++
				val = w[i]
			}
			switch name {
			case "race", "short":
				on := true
				if hasVal {
					b, err := strconv.ParseBool(val)
					require.NoError(t, err, "%s", line)
					on = b
				}
				if name == "race" {
					s.race = on
				} else {
					s.short = on
				}
			case "run":
				s.run = regexp.MustCompile(topLevel(val))
			case "skip":
				s.skip = regexp.MustCompile(topLevel(val))
			case "tags":
				s.tags = strings.FieldsFunc(val, func(r rune) bool { return r == ',' || r == ' ' })
			}
		}
		steps = append(steps, s)
	}
	return steps
}

// topLevel is the part of a -run or -skip pattern that go test matches
// against a top-level test's name: up to the first slash outside brackets
// and parentheses (each further part matches a level of subtests). A test
// whose name matches it runs, at least in part: a step that runs only
// some subtests of a race-skipped test is taken to run what skips.
func topLevel(pattern string) string {
	depth := 0
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '\\':
			i++
		case '[', '(':
			depth++
		case ']', ')':
			depth--
		case '/':
			if depth == 0 {
				return pattern[:i]
			}
		}
	}
	return pattern
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

type skippedTest struct {
	pkg, name string
	build     constraint.Expr // the file's build constraint; nil: none
}

// file is one parsed Go file, with the name it imports this package by.
type file struct {
	f     *ast.File
	race  string // "" when it does not import it
	build constraint.Expr
	test  bool
}

// raceSkippedTests finds the tests that skip under -race (see
// TestEveryRaceSkippedTestRunsInMakeTest).
func raceSkippedTests(t *testing.T) []skippedTest {
	t.Helper()
	byDir := map[string][]file{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(moduleRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != moduleRoot && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution|parser.ParseComments)
		if err != nil {
			return err
		}
		fl := file{f: f, test: strings.HasSuffix(path, "_test.go"), build: buildConstraint(t, path)}
		for _, im := range f.Imports {
			if p, _ := strconv.Unquote(im.Path.Value); p == racePath {
				fl.race = "race"
				if im.Name != nil {
					fl.race = im.Name.Name
				}
			}
		}
		byDir[filepath.Dir(path)] = append(byDir[filepath.Dir(path)], fl)
		return nil
	})
	require.NoError(t, err)

	var found []skippedTest
	declared := map[string]bool{}
	for dir, files := range byDir {
		rel, err := filepath.Rel(moduleRoot, dir)
		require.NoError(t, err)
		pkg := "./" + filepath.ToSlash(rel)
		// Functions outside the tests that skip: declared in reachedFrom.
		for _, fl := range files {
			for _, fn := range funcs(fl.f) {
				if !fl.test && skips(fn.Body, fl.race, false) {
					name := pkg + "." + funcName(fn)
					tests, ok := reachedFrom[name]
					require.True(t, ok, "%s skips under -race: name the tests that reach it in reachedFrom", name)
					declared[name] = true
					for _, tn := range tests {
						p, n, _ := strings.Cut(tn[2:], ".")
						found = append(found, skippedTest{pkg: "./" + p, name: n})
					}
				}
			}
		}
		// The tests' helpers that skip, then those that call them, until
		// no more are found.
		helpers := map[string]bool{}
		for grew := true; grew; {
			grew = false
			for _, fl := range files {
				for _, fn := range funcs(fl.f) {
					if fl.test && !isTest(fn) && !helpers[fn.Name.Name] && (skips(fn.Body, fl.race, false) || refersTo(fn.Body, helpers)) {
						helpers[fn.Name.Name], grew = true, true
					}
				}
			}
		}
		for _, fl := range files {
			for _, fn := range funcs(fl.f) {
				if fl.test && isTest(fn) && (skips(fn.Body, fl.race, true) || refersTo(fn.Body, helpers)) {
					found = append(found, skippedTest{pkg: pkg, name: fn.Name.Name, build: fl.build})
				}
			}
		}
	}
	for name := range reachedFrom {
		require.True(t, declared[name], "reachedFrom names %s, which does not skip under -race (or is gone)", name)
	}
	return found
}

func funcs(f *ast.File) []*ast.FuncDecl {
	var fns []*ast.FuncDecl
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Body != nil {
			fns = append(fns, fn)
		}
	}
	return fns
}

// funcName is fn's name, with its receiver's type for a method
// ("Target.floods").
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	if g, ok := typ.(*ast.IndexExpr); ok {
		typ = g.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}

func isTest(fn *ast.FuncDecl) bool {
	n := fn.Name.Name
	return fn.Recv == nil && (strings.HasPrefix(n, "Test") && n != "TestMain" || strings.HasPrefix(n, "Fuzz"))
}

// buildConstraint is the //go:build line of the file at path; nil: none.
func buildConstraint(t *testing.T, path string) constraint.Expr {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if constraint.IsGoBuild(line) {
			x, err := constraint.Parse(line)
			require.NoError(t, err, path)
			return x
		}
		if strings.HasPrefix(line, "package ") {
			break
		}
	}
	return nil
}

// skips reports whether body skips when race.Enabled (read through the
// file's name for the package, raceName) is true: an if whose condition
// reads it and whose body skips — or, on !Enabled, whose else does — or a
// switch case on it that skips. A test (test: true) also skips by
// returning there.
func skips(body ast.Node, raceName string, test bool) bool {
	if raceName == "" {
		return false
	}
	ends := func(n ast.Node) bool { return n != nil && endsTest(n, test) }
	seen := false
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IfStmt:
			if u, ok := n.Cond.(*ast.UnaryExpr); ok && u.Op == token.NOT && isEnabled(u.X, raceName) {
				seen = seen || n.Else != nil && ends(n.Else)
			} else if reads(n.Cond, raceName) {
				seen = seen || ends(n.Body)
			}
		case *ast.CaseClause:
			for _, x := range n.List {
				if reads(x, raceName) && ends(&ast.BlockStmt{List: n.Body}) {
					seen = true
				}
			}
		}
		return !seen
	})
	return seen
}

func isEnabled(x ast.Expr, raceName string) bool {
	sel, ok := x.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Enabled" {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == raceName
}

func reads(n ast.Node, raceName string) bool {
	seen := false
	ast.Inspect(n, func(n ast.Node) bool {
		if x, ok := n.(ast.Expr); ok && isEnabled(x, raceName) {
			seen = true
		}
		return !seen
	})
	return seen
}

// endsTest reports whether n calls a Skip method (Skip, Skipf, SkipNow)
// — or, in a test, returns.
func endsTest(n ast.Node, test bool) bool {
	seen := false
	ast.Inspect(n, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false // (a closure's return is its own)
		case *ast.ReturnStmt:
			seen = seen || test
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok && strings.HasPrefix(sel.Sel.Name, "Skip") {
				seen = true
			}
		}
		return !seen
	})
	return seen
}

// refersTo reports whether n names one of names: called or passed, as a
// function or a method.
func refersTo(n ast.Node, names map[string]bool) bool {
	seen := false
	ast.Inspect(n, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Ident:
			seen = seen || names[n.Name]
		case *ast.SelectorExpr:
			seen = seen || names[n.Sel.Name]
		}
		return !seen
	})
	return seen
}
