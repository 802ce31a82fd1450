package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/server"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
)

// peakRSS is the most memory the process has had resident (VmHWM), in
// bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		if rest, ok := strings.CutPrefix(lines.Text(), "VmHWM:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), &kb)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// program calls the default server's program tool and returns whether it
// was a tool error, its code and its text.
func program(t *testing.T, p *at.Process, token, source string, commit bool) (bool, string, string) {
	t.Helper()
	body, header := at.Request{Method: "tools/call", Params: map[string]any{"name": "program",
		"arguments": map[string]any{"source": source, "commit": commit, "intent": "Measure the memory a program may take."}}}.Body()
	reply, err := at.PostBody(t.Context(), http.DefaultClient, p.URL+"/mcp/v1/"+at.Account+"/default", token, body, header)
	if err != nil {
		t.Fatalf("the program's request: %v", err)
	}
	if reply.Status != http.StatusOK {
		t.Fatalf("the program's request: %s", reply)
	}
	result := reply.Result()
	raw, _ := json.Marshal(result)
	isError, _ := result["isError"].(bool)
	code, _ := at.Dig(result, "_meta", "com.twisp/error", "code").(string)
	return isError, code, string(raw)
}

const memoryLimit = 300 << 20

// Starlark programs that would take gigabytes are refused before they
// allocate, with limit_exceeded naming the memory limit, and commit
// nothing; actiond stays under 300 MB resident while they run, one at a
// time and sixteen at once beside programs that use most of their budget,
// and goes on serving. (Before the budget, the first program took
// actiond from about 42 MB to 2.4 GB, and the second to 2.9 GB.)
func TestProgramsCannotExhaustMemory(t *testing.T) {
	opts := storetest.Options(t, store.SQLite)
	p := at.StartProcess(t, binary, opts, "")
	token := p.Token(server.LocalPrincipal, "memory")
	refused := map[string]string{
		"the issue's comprehension": `def run(event):
    return len([("x" * (1 << 28)) + str(i) for i in range(6)])
`,
		"one repetition": `def run(event):
    return len("x" * (1 << 29))
`,
		"a commit that runs out": `def run(event):
    graphql("mutation { kv { put(namespace: \"memory\", key: \"k\", value: 1) { key } } }")
    s = "x"
    for i in range(40):
        s = s + s
    return len(s)
`,
	}
	for name, source := range refused {
		isError, code, text := program(t, p, token, source, true)
		if !isError || code != "limit_exceeded" || !strings.Contains(text, "its memory limit") {
			t.Errorf("%s: isError %v, code %q: %.400s", name, isError, code, text)
		}
		if peak := peakRSS(t, p.PID()); peak > memoryLimit {
			t.Fatalf("after %s actiond's peak resident memory is %d MB", name, peak>>20)
		}
	}
	t.Logf("peak resident memory after the programs one at a time: %d MB", peakRSS(t, p.PID())>>20)
	if got := p.Env(store.SQLite).KV("memory", "k"); got != nil {
		t.Errorf("a refused commit wrote %v", got)
	}

	// Sixteen at once: the refused ones, and ones that keep 48 MiB of
	// their 64 MiB budget while they run.
	near := `def run(event):
    kept = "y" * (48 << 20)
    return len(kept) + len(str(event["data"]))
`
	var wg sync.WaitGroup
	var mu sync.Mutex
	failures := []string{}
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 3 {
				source, want := near, ""
				if (i+round)%2 == 0 {
					for _, s := range refused {
						source, want = s, "limit_exceeded"
						break
					}
				}
				isError, code, text := program(t, p, token, source, false)
				if isError != (want != "") || code != want {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("isError %v code %q: %.300s", isError, code, text))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	peak := peakRSS(t, p.PID())
	t.Logf("peak resident memory after sixteen at once: %d MB", peak>>20)
	if peak > memoryLimit {
		t.Errorf("actiond's peak resident memory is %d MB", peak>>20)
	}
	if isError, _, text := program(t, p, token, "def run(event):\n    return 41 + 1\n", false); isError || !strings.Contains(text, "42") {
		t.Errorf("actiond does not go on serving: %s", text)
	}
}

// The native cel tool and the cel() a program calls refuse an expression
// whose replace, join or format would build a string past the limit,
// from its arguments, before building it: actiond stays under 300 MB.
// (Before, s.replace("", s) of 30,000 characters allocated 900 MB in one
// call, and a join of 300 references to a 1 MiB string 1.6 GB.)
func TestCELCannotExhaustMemory(t *testing.T) {
	opts := storetest.Options(t, store.SQLite)
	p := at.StartProcess(t, binary, opts, "")
	token := p.Token(server.LocalPrincipal, "memory")
	vars := map[string]any{"s": strings.Repeat("x", 30000), "l": make([]any, 300), "big": strings.Repeat("y", 1<<20)}
	for _, expression := range []string{`s.replace("", s).size()`, `l.map(x, big).join(",").size()`} {
		body, header := at.Request{Method: "tools/call", Params: map[string]any{"name": "cel",
			"arguments": map[string]any{"expression": expression, "variables": vars, "intent": "Measure what an expression may build."}}}.Body()
		reply, err := at.PostBody(t.Context(), http.DefaultClient, p.URL+"/mcp/v1/"+at.Account+"/default", token, body, header)
		if err != nil || reply.Status != http.StatusOK {
			t.Fatalf("%s: %v %s", expression, err, reply)
		}
		raw, _ := json.Marshal(reply.Result())
		if reply.Result()["isError"] != true || !strings.Contains(string(raw), "past the limit") {
			t.Errorf("%s: %.400s", expression, raw)
		}
		if peak := peakRSS(t, p.PID()); peak > memoryLimit {
			t.Fatalf("after %s actiond's peak resident memory is %d MB", expression, peak>>20)
		}
	}
	source := "def run(event):\n    return cel('s.replace(\"\", s).size()', vars = {\"s\": \"x\" * 30000})\n"
	if isError, _, text := program(t, p, token, source, false); !isError || !strings.Contains(text, "past the limit") {
		t.Errorf("a program's cel(): %.400s", text)
	}
	t.Logf("peak resident memory: %d MB", peakRSS(t, p.PID())>>20)
}
