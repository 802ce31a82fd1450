package explorer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/incusspawn/isx/internal/sourcetree"
)

// browser is headless Chromium (Debian's package) driven over the DevTools
// protocol. Everything the page logs as an error — an exception, a
// console.error, a Content-Security-Policy violation — fails the test.
type browser struct {
	t      testing.TB
	ctx    context.Context
	mu     sync.Mutex
	errors []string
	// transferred counts the bytes each response took on the wire, by URL.
	transferred map[string]float64
	urls        map[network.RequestID]string
}

// viewport sizes: a laptop, and a phone held upright.
const (
	laptopWidth, laptopHeight = 1366, 900
	narrowWidth, narrowHeight = 390, 844
)

func chromium(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("the explorer's tests need Debian's chromium: run scripts/install-chromium.sh as root")
	}
	return path
}

func newBrowser(t testing.TB, width, height int) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // tests run as root
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(width, height),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	b := &browser{t: t, ctx: ctx, transferred: map[string]float64{}, urls: map[network.RequestID]string{}}
	err := chromedp.Listen(ctx, b.listen)
	if err == nil {
		err = chromedp.Do(ctx, chromedp.EmulateViewport(int64(width), int64(height)))
	}
	if err != nil {
		cancel()
		cancelAlloc()
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() {
		if err := chromedp.Cancel(ctx); err != nil {
			t.Logf("closing chromium: %v", err)
		}
		cancel()
		cancelAlloc()
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, e := range b.errors {
			t.Errorf("the page logged an error: %s", e)
		}
	})
	return b
}

func (b *browser) listen(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		text := d.Text
		if d.Exception != nil {
			text += " " + d.Exception.Description
		}
		b.errors = append(b.errors, fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber, text))
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError {
			var parts []string
			for _, arg := range ev.Args {
				parts = append(parts, string(arg.Value)+arg.Description)
			}
			b.errors = append(b.errors, "console.error: "+strings.Join(parts, " "))
		}
	case *cdplog.EventEntryAdded:
		// The 401 the page answers with its token form is expected; anything
		// else at error level (a policy violation, a failed script) is not.
		if ev.Entry.Level == cdplog.EntryLevelError && !strings.Contains(ev.Entry.Text, "401") {
			b.errors = append(b.errors, fmt.Sprintf("%s: %s (%s)", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
		}
	case *network.EventResponseReceived:
		b.urls[ev.RequestID] = ev.Response.URL
	case *network.EventLoadingFinished:
		b.transferred[b.urls[ev.RequestID]] += ev.EncodedDataLength
	}
}

// bytesFrom sums what the page transferred from URLs with the prefix.
func (b *browser) bytesFrom(prefix string) float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	var n float64
	for url, size := range b.transferred {
		if strings.HasPrefix(url, prefix) {
			n += size
		}
	}
	return n
}

func (b *browser) resetTransferred() {
	b.mu.Lock()
	defer b.mu.Unlock()
	clear(b.transferred)
}

func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

// eval evaluates a script expression in the page.
func eval[T any](b *browser, expression string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expression))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expression, err)
	}
	return v
}

// open loads the page at a URL and waits for its view to render.
func (b *browser) open(url, view string) {
	b.t.Helper()
	b.do(chromedp.Navigate(url))
	b.waitView(view)
}

// visit moves the open page to a fragment, as following a link does.
func (b *browser) visit(fragment, view string) {
	b.t.Helper()
	eval[any](b, `delete document.documentElement.dataset.readyAt; location.hash = `+quote(fragment)+`; null`)
	b.waitView(view)
}

// pageState is what the page says of its view.
type pageState struct {
	View  string `json:"view"`
	State string `json:"state"`
	Text  string `json:"text"`
}

// waitView waits until the page says the view rendered (or failed, which
// the check of the view's name then reports).
func (b *browser) waitView(view string) {
	b.t.Helper()
	b.waitFor("the "+view+" view", `document.documentElement.dataset.readyAt && ["ready", "error"].includes(document.getElementById("main").dataset.state)`, 30*time.Second)
	state := eval[pageState](b, `(() => { const m = document.getElementById("main"); return {view: m.dataset.view, state: m.dataset.state, text: m.innerText.slice(0, 800)}; })()`)
	if state.View != view || state.State != "ready" {
		b.t.Fatalf("the page shows %s (%s), want the %s view:\n%s", state.View, state.State, view, state.Text)
	}
}

// waitFor polls an expression in the page until it is truthy.
func (b *browser) waitFor(what, expression string, limit time.Duration) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, limit+5*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool]("!!("+expression+")", chromedp.WithPollingTimeout(limit))); err != nil {
		text, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.getElementById("main").innerText.slice(0, 800)`))
		b.t.Fatalf("waiting for %s: %v\nthe page shows:\n%s", what, err, text)
	}
}

// follow clicks what leads to another view and waits for that view: the
// page's ready mark is cleared first, so the wait cannot see the old one.
func (b *browser) follow(selector, view string) {
	b.t.Helper()
	eval[any](b, `delete document.documentElement.dataset.readyAt; null`)
	b.click(selector)
	b.waitView(view)
}

func (b *browser) click(selector string) {
	b.t.Helper()
	b.do(chromedp.Click(chromedp.CSS(selector), chromedp.NodeVisible))
}

// screenshot captures the whole page. With UPDATE_SCREENSHOTS=1 it is
// written to docs/explorer/ for the README; otherwise to the test's own
// directory, so that taking it is tested either way.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if len(png) < 1000 || string(png[1:4]) != "PNG" {
		b.t.Fatalf("screenshot %s is not a PNG (%d bytes)", name, len(png))
	}
	dir := b.t.TempDir()
	if os.Getenv("UPDATE_SCREENSHOTS") == "1" {
		root, err := sourcetree.Root()
		if err != nil {
			b.t.Fatal(err)
		}
		dir = filepath.Join(root, "docs", "explorer")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
