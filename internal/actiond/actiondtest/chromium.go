package actiondtest

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Chromium starts headless Chromium (Debian's, which
// scripts/install-chromium.sh installs) with a profile of its own and no
// background networking (this machine's network is closed), and returns a
// browser context, closed at the end of the test.
func Chromium(t testing.TB) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("Chromium is not installed (scripts/install-chromium.sh installs it): %v", err)
	}
	options := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("headless", "new"), chromedp.UserDataDir(t.TempDir()), chromedp.Flag("disable-background-networking", true))
	allocator, cancelAllocator := chromedp.NewExecAllocator(context.Background(), options...)
	browser, cancelBrowser := chromedp.NewContext(allocator)
	ctx, cancelTimeout := context.WithTimeout(browser, 2*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelBrowser(); cancelAllocator() })
	// The first run starts the browser, which lives as long as browser.
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
}
