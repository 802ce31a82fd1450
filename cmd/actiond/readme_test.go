package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/sourcetree"
)

// readmeSection is the README's worked example of a tool and a server.
const readmeSection = "### A tool and a server of your own"

// readmeCommands are the shell blocks of a README section, in order.
func readmeCommands(t *testing.T, heading string) []string {
	t.Helper()
	root, err := sourcetree.Root()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, found := strings.Cut(string(readme), "\n"+heading+"\n")
	if !found {
		t.Fatalf("README.md has no section %q", heading)
	}
	section, _, _ = strings.Cut(section, "\n### ")
	var blocks []string
	for {
		_, rest, found := strings.Cut(section, "\n```sh\n")
		if !found {
			return blocks
		}
		block, after, closed := strings.Cut(rest, "\n```\n")
		if !closed {
			t.Fatalf("an sh block of %q does not end", heading)
		}
		blocks = append(blocks, block)
		section = after
	}
}

// The README's worked example, its own commands as written, run against a
// real `actiond serve` on its default address's place: it creates a cel
// action and a server that lists it, calls the tool, and lists the
// request.
func TestREADMECreatesAToolAndAServer(t *testing.T) {
	p := serve(t, store.SQLite)
	blocks := readmeCommands(t, readmeSection)
	if len(blocks) != 3 {
		t.Fatalf("the README's example has %d sh blocks, want 3", len(blocks))
	}
	bin := filepath.Dir(binary)
	env := environment("ACTIOND_DATA="+p.Store.DataDir, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	sh := func(script string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", strings.ReplaceAll(script, "http://127.0.0.1:8080", p.URL))
		cmd.Env = env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v\n%s\n%s\n%s", err, script, stdout.String(), stderr.String())
		}
		return stdout.String()
	}
	for i, block := range blocks[:2] {
		var created struct {
			Data struct {
				Actions struct {
					CreateAction struct {
						ID      string
						Version int
					}
				}
			}
			Errors []any
		}
		out := sh(block)
		if err := json.Unmarshal([]byte(out), &created); err != nil || len(created.Errors) > 0 ||
			!uuidPattern.MatchString(created.Data.Actions.CreateAction.ID) || created.Data.Actions.CreateAction.Version != 1 {
			t.Fatalf("block %d answered %s", i+1, out)
		}
	}
	out := sh(blocks[2])
	reply, table, _ := strings.Cut(out, "\n")
	var rpc map[string]any
	if err := json.Unmarshal([]byte(reply), &rpc); err != nil || !at.JSONEqual(at.Dig(rpc, "result", "structuredContent"), map[string]any{"doubled": 42}) {
		t.Fatalf("the call answered %s", out)
	}
	rows := columns(t, table, requestColumns...)
	if len(rows) != 1 || !strings.Contains(rows[0], "calc") || !strings.Contains(rows[0], "tools/call") || !strings.Contains(rows[0], "double") || !strings.Contains(rows[0], "SUCCEEDED") {
		t.Fatalf("actiond executions --server calc:\n%s", table)
	}
	id := strings.Fields(rows[0])[0]
	if detail := mustActiond(t, "execution", "--data", p.Store.DataDir, id[:8]); !strings.Contains(detail, "Request    tools/call double") || !strings.Contains(detail, "double  SUCCEEDED, preview") {
		t.Errorf("the README's last sentence: execution %s:\n%s", id[:8], detail)
	}
}
