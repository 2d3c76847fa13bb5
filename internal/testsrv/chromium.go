package testsrv

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/chromedp/chromedp"
)

// Chromium finds the browser, or skips the test (fails it in CI, where
// .ci/run must have installed Debian package chromium).
func Chromium(tb testing.TB) string {
	tb.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		tb.Fatal("chromium not found in CI: .ci/run must install Debian package chromium")
	}
	tb.Skip("chromium not found: apt-get install chromium (as .ci/run does) to run this browser test")
	return ""
}

// Browser starts a headless chromium of its own (its own profile and
// renderer, so that one test's storage and heap are not another's),
// stopped when the test ends, and returns a tab's context. The
// JavaScript heap can be collected (gc()) and measured precisely
// (performance.memory), for the tests that bound it.
func Browser(tb testing.TB, bin string, w, h int) context.Context {
	tb.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.WindowSize(w, h),
		chromedp.Flag("js-flags", "--expose-gc"), chromedp.Flag("enable-precise-memory-info", true))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	tb.Cleanup(func() { cancel(); acancel() })
	if err := chromedp.Do(ctx); err != nil {
		tb.Fatalf("start chromium: %v", err)
	}
	return ctx
}
