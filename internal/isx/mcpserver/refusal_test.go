package mcpserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/holding"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/task"
	"github.com/incusspawn/isx/internal/isx/template"
)

// A failure is translated into a refusal once, at the wire, from its code
// and what it concerns, whichever domain made it: the words a program
// branches on, the sentence, and the instance and task in _meta. A refusal
// translated again is the same refusal. This is the seam beside
// TestRefusalCodes, which reaches each code through the real server.
func TestOneTranslationAtTheWire(t *testing.T) {
	set, err := template.NewSet()
	if err != nil {
		t.Fatal(err)
	}
	unknownTemplate := set.Approvable("tpl-none")
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Dir(config.MCPPath(home)), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(config.MCPPath(home), []byte("max-instances: many\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, badPolicy := config.LoadMCP(home)
	if badPolicy == nil {
		t.Fatal("mcp.yaml with a bad value loaded")
	}
	cases := []struct {
		name           string
		err            error
		code           Code
		message        string
		instance, task string
	}{
		{"task", coded.New(task.CodeWrongState, "task t-1 is still running").On("instance", "w1").On("task_id", "t-1"),
			CodeWrongState, "task t-1 is still running", "w1", "t-1"},
		{"holding", fmt.Errorf("adopting: %w", coded.New(holding.CodeNotHeld, "instance w1 is an orphan").On("instance", "w1")),
			CodeNotHeld, "instance w1 is an orphan", "w1", ""},
		{"instance exists", instance.NewError(instance.CodeExists, "w2", nil, "instance w2 exists"), CodeBusy, "instance w2 exists", "w2", ""},
		{"instance without Incus", instance.NewError(instance.CodeNotManaged, "w2", incus.ErrUnavailable, "copying w2"),
			CodeUnavailable, "copying w2: " + incus.ErrUnavailable.Error(), "w2", ""},
		{"an unknown code", coded.New("is_template", "w3 is a template"), CodeInternal, "w3 is a template", "", ""},
		{"the task named on the way", on(coded.New(holding.CodeWrongState, "instance w1 is stopped").On("instance", "w1"), "", "t-2"),
			CodeWrongState, "instance w1 is stopped", "w1", "t-2"},
		{"incus", on(incus.ErrNotFound, "w4", ""), CodeNotFound, "Incus has no such instance: " + incus.ErrNotFound.Error(), "w4", ""},
		{"interrupted", context.Canceled, CodeUnavailable, "the call was interrupted before it finished; retry: context canceled", "", ""},
		{"an unknown template", unknownTemplate, CodeRefused, "the template definitions cannot be read, so isx cannot tell which templates may be used; the user must fix: ", "", ""},
		{"mcp.yaml", badPolicy, CodeRefused, badPolicy.Error(), "", ""},
		{"a refusal", refusef(CodeLimit, "too many").On(aboutInstance, "w5"), CodeLimit, "too many", "w5", ""},
	}
	for _, c := range cases {
		r := refusalOf(c.err)
		if r.Code != c.code || !strings.HasPrefix(r.Error(), c.message) || r.About[aboutInstance] != c.instance || r.About[aboutTask] != c.task {
			t.Errorf("%s: refusal %s %q about %v, want %s %q about instance %q, task %q", c.name, r.Code, r.Error(), r.About, c.code, c.message, c.instance, c.task)
		}
		again := refusalOf(r)
		if again.Code != r.Code || again.Error() != r.Error() || fmt.Sprint(again.About) != fmt.Sprint(r.About) {
			t.Errorf("%s: translated again, %s %q %v; first %s %q %v", c.name, again.Code, again.Error(), again.About, r.Code, r.Error(), r.About)
		}
	}
}
