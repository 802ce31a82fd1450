// Package toolsnap keeps a snapshot of each tool a server lists (name,
// description, annotations, input and output schema) in a golden file of
// its own, testdata/toolsnaps/<tool>.json, so that a changed schema fails a
// test until its snapshot is updated on purpose and the diff reviewed.
//
// Run the tests with UPDATE_TOOLSNAPS=1 to write the snapshots afresh.
package toolsnap

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Dir is where a package's snapshots live.
const Dir = "testdata/toolsnaps"

// CheckAll compares every tool with its snapshot, and fails for a snapshot
// whose tool no longer exists.
func CheckAll(t testing.TB, tools []*mcp.Tool) {
	t.Helper()
	names := make([]string, 0, len(tools))
	for _, tool := range tools {
		names = append(names, tool.Name)
		Check(t, tool)
	}
	files, err := filepath.Glob(filepath.Join(Dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		if slices.Contains(names, name) {
			continue
		}
		if updating() {
			if err := os.Remove(file); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("%s is the snapshot of a tool the server no longer lists; delete it (or run with UPDATE_TOOLSNAPS=1)", file)
	}
}

// Check compares one tool with its snapshot.
func Check(t testing.TB, tool *mcp.Tool) {
	t.Helper()
	got, err := json.MarshalIndent(tool, "", "  ")
	if err != nil {
		t.Fatalf("%s: %v", tool.Name, err)
	}
	got = append(got, '\n')
	file := filepath.Join(Dir, tool.Name+".json")
	if updating() {
		if err := os.MkdirAll(Dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Errorf("%s has no snapshot (%v); run the test with UPDATE_TOOLSNAPS=1 and review %s", tool.Name, err, file)
		return
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s changed from its snapshot %s:\n%s\nIf that is intended, run the test with UPDATE_TOOLSNAPS=1 and review the diff.", tool.Name, file, firstDifference(want, got))
	}
}

func updating() bool { return os.Getenv("UPDATE_TOOLSNAPS") == "1" }

// firstDifference shows the first line that differs, with its neighbours.
func firstDifference(want, got []byte) string {
	wantLines, gotLines := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := 0; i < len(wantLines) || i < len(gotLines); i++ {
		var w, g string
		if i < len(wantLines) {
			w = wantLines[i]
		}
		if i < len(gotLines) {
			g = gotLines[i]
		}
		if w != g {
			return "line " + strconv.Itoa(i+1) + ":\n  snapshot: " + w + "\n  now:      " + g
		}
	}
	return "(no line differs)"
}
