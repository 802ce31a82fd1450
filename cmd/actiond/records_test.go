package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/testkit"
)

// celCall is a tools/call of the default server's cel tool.
func celCall(expression string) at.Request {
	return at.Request{Method: "tools/call", Params: map[string]any{"name": "cel", "arguments": map[string]any{
		"expression": expression, "intent": "Check the arithmetic.",
	}}}
}

// columns checks that every line of a table starts its columns where the
// header's do: the table is aligned.
func columns(t *testing.T, table string, header ...string) []string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(table, "\n"), "\n")
	var starts []int
	for _, h := range header {
		i := strings.Index(lines[0], h)
		if i < 0 {
			t.Fatalf("header %q lacks %s", lines[0], h)
		}
		starts = append(starts, i)
	}
	// Columns count characters, as a terminal shows them: a cell cut short
	// ends in "…", one character of three bytes.
	for _, text := range lines[1:] {
		line := []rune(text)
		for _, start := range starts[1:] {
			if start >= len(line) || line[start-1] != ' ' || line[start] == ' ' {
				t.Fatalf("not aligned at column %d:\n%s", start, table)
			}
		}
	}
	return lines[1:]
}

// sessions, executions [--session] and execution ID read the record
// without GraphQL, as aligned tables and --json (golden, with IDs and
// times replaced); executions --follow prints each new request once it
// has finished.
func TestRecordCommands(t *testing.T) {
	p := serve(t, store.SQLite)
	env := p.Env(store.SQLite)
	db := at.StoreArgs(p.Store)
	ada, bob := p.Token("local", "ada"), p.Token("local", "bob")
	for _, q := range []struct {
		token string
		req   at.Request
	}{{ada, celCall("1 + 2")}, {ada, celCall("1 / 0")}, {bob, at.Request{Method: "tools/list"}}} {
		if reply := env.Post("default", q.token, q.req); reply.Status != 200 {
			t.Fatalf("request: %s", reply)
		}
	}
	if reply := env.Post("default", ada, at.Request{Method: "nonexistent/method"}); reply.Status != 404 {
		t.Fatalf("a refused request: %s", reply)
	}
	replace := map[string]string{p.URL: "<url>"}

	table := mustActiond(t, append([]string{"sessions"}, db...)...)
	rows := columns(t, table, "SERVER", "SESSION", "REQUESTS", "CALLS", "CREATED", "LAST REQUEST", "STATE")
	if len(rows) != 2 || !strings.HasPrefix(rows[0], "default  5:local:ada  2 ") || !strings.Contains(rows[1], "5:local:bob  1 ") {
		t.Fatalf("sessions:\n%s", table)
	}
	testkit.Golden(t, "json/sessions.json", normalise(mustActiond(t, append([]string{"sessions", "--json"}, db...)...), replace))

	table = mustActiond(t, append([]string{"executions"}, db...)...)
	rows = columns(t, table, "EXECUTION", "STARTED", "SERVER", "METHOD", "TOOL", "SUBJECT", "STATUS", "DURATION", "SESSION")
	if len(rows) != 4 || !strings.Contains(rows[0], "tools/call") || !strings.Contains(rows[3], "FAILED (refused)") {
		t.Fatalf("executions:\n%s", table)
	}
	var all []map[string]any
	raw := mustActiond(t, append([]string{"executions", "--json"}, db...)...)
	if err := json.Unmarshal([]byte(raw), &all); err != nil {
		t.Fatal(err)
	}
	testkit.Golden(t, "json/executions.json", normalise(raw, replace))
	if only := mustActiond(t, append([]string{"executions", "--session", "5:local:bob"}, db...)...); strings.Count(only, "\n") != 2 || !strings.Contains(only, "tools/list") {
		t.Fatalf("--session:\n%s", only)
	}
	if last := mustActiond(t, append([]string{"executions", "--limit", "1"}, db...)...); strings.Count(last, "\n") != 2 || !strings.Contains(last, "refused") {
		t.Fatalf("--limit 1:\n%s", last)
	}

	if byServer := mustActiond(t, append([]string{"executions", "--server", "default"}, db...)...); strings.Count(byServer, "\n") != 5 {
		t.Fatalf("--server default:\n%s", byServer)
	}
	if sessions := mustActiond(t, append([]string{"sessions", "--server", "default"}, db...)...); strings.Count(sessions, "\n") != 3 {
		t.Fatalf("sessions --server default:\n%s", sessions)
	}
	for _, command := range []string{"sessions", "executions"} {
		if r := actiond(t, append([]string{command, "--server", "nope"}, db...)...); r.code != 1 || !strings.Contains(r.stderr, `no MCP server is named "nope"`) {
			t.Fatalf("%s --server nope: %d %s", command, r.code, r.stderr)
		}
	}

	first := all[0]["id"].(string)
	// Execution IDs, sessions and servers complete from the database.
	if ids := mustActiond(t, append(append([]string{"__complete", "execution"}, db...), "")...); !strings.Contains(ids, first+"\tdefault tools/call") {
		t.Fatalf("execution IDs complete as %q", ids)
	}
	if ids := mustActiond(t, append(append([]string{"__complete", "executions"}, db...), "--session", "5:local:b")...); !strings.HasPrefix(ids, "5:local:bob\tdefault\n") {
		t.Fatalf("sessions complete as %q", ids)
	}
	if names := mustActiond(t, append(append([]string{"__complete", "executions"}, db...), "--server", "")...); !strings.HasPrefix(names, "default\n") {
		t.Fatalf("servers complete as %q", names)
	}
	detail := mustActiond(t, append([]string{"execution", first}, db...)...)
	for _, want := range []string{"Execution  " + first, "Server     default (version 1)", "Request    tools/call cel", "Intent     Check the arithmetic.", "Subject    ada (principal local", "Calls:", "CALL  STATUS     DURATION", "cel   SUCCEEDED"} {
		if !strings.Contains(detail, want) {
			t.Errorf("execution lacks %q:\n%s", want, detail)
		}
	}
	testkit.Golden(t, "json/execution.json", normalise(mustActiond(t, append([]string{"execution", "--json", first}, db...)...), replace))
	if r := actiond(t, append([]string{"execution", "00000000-0000-4000-8000-00000000dead"}, db...)...); r.code != 1 || !strings.Contains(r.stderr, "no execution 00000000-0000-4000-8000-00000000dead") {
		t.Fatalf("an unknown execution: %d %s", r.code, r.stderr)
	}

	// --follow: what exists first, then each new request as it finishes.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	follow := exec.CommandContext(ctx, binary, append([]string{"executions", "--follow", "--json", "--limit", "1"}, db...)...)
	follow.Env = environment()
	stdout, err := follow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); follow.Wait() }()
	lines := bufio.NewReader(stdout)
	readLine := func() map[string]any {
		t.Helper()
		line, err := lines.ReadString('\n')
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
		var row map[string]any
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("--follow --json printed %q", line)
		}
		return row
	}
	if row := readLine(); row["role"] != "refusal" {
		t.Fatalf("first line %v", row)
	}
	if reply := env.Post("default", bob, celCall("2 * 21")); reply.Status != 200 {
		t.Fatalf("request: %s", reply)
	}
	if row := readLine(); row["method"] != "tools/call" || row["subject"] != "bob" || row["status"] != "SUCCEEDED" {
		t.Fatalf("followed %v", row)
	}
}
