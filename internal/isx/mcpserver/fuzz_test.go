package mcpserver

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/audit"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/template"
)

func offlineServer(t testing.TB) *Server {
	t.Helper()
	dir := t.TempDir()
	s, err := New(Options{
		Home:      dir,
		Client:    incus.New(filepath.Join(dir, "none.socket")),
		Templates: func() (*template.Set, error) { return template.NewSet() },
		Owner:     "fuzz", Session: "stdio:1:1",
		Log: audit.Open(filepath.Join(dir, "mcp.log"), audit.Options{}),
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var argumentSeeds = []string{
	`{}`, `null`, ``, `[]`, `"x"`, `{"max_turns":3}`,
	`{"template":"tpl-dev","name_hint":"870-impl","purpose":"#870 implement","idempotency_key":"job-1"}`,
	`{"template":"tpl-dev","from_instance":"mcp-a"}`,
	`{"instance":"mcp-dev-work-abcde","command":"make test","cwd":"/home/agent/work","env":{"A":"b"},"stdin":"x","timeout_seconds":30,"max_output_bytes":100}`,
	`{"instance":"mcp-dev-work-abcde","command":"sleep 9","background":true,"idempotency_key":"a:b.c-d_e"}`,
	`{"instance":"mcp-dev-work-abcde","command":"x","timeout_seconds":1.5}`,
	`{"instance":"mcp-dev-work-abcde","task_id":"t-abcdefghij","wait_seconds":300}`,
	`{"instance":"mcp-dev-work-abcde","task_id":"t-abcdefghij","max_bytes":-1}`,
	`{"tasks":[{"instance":"mcp-a","task_id":"t-abcdefghij"}],"wait_seconds":5}`,
	`{"tasks":[{"instance":"mcp-a","task_id":"t-abcdefghij","extra":1}]}`,
	`{"instance":"mcp-a","force":"yes"}`,
	`{"instance":"mcp-a"} {"instance":"mcp-b"}`,
	`{"instance":"mcp-a","instance":"mcp-b"}`,
	`{"env":{"1BAD":"x"},"instance":"mcp-a","command":"x"}`,
}

// FuzzToolArguments: decoding any bytes as any tool's arguments never
// panics, and every failure is a refusal with invalid_argument, or, for
// arguments that are not an object, a JSON-RPC invalid-params error.
func FuzzToolArguments(f *testing.F) {
	s := offlineServer(f)
	names := s.ToolNames()
	for i, seed := range argumentSeeds {
		for j := range names {
			f.Add(uint8(i+j), []byte(seed))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, raw []byte) {
		tool := names[int(which)%len(names)]
		err := s.Decode(tool, raw)
		if err == nil {
			return
		}
		refusal := coded.Of(err)
		var protocol *jsonrpc.Error
		switch {
		case refusal != nil:
			if refusal.Code != CodeInvalidArgument || refusal.Message == "" {
				t.Fatalf("%s(%q): refusal %v", tool, raw, refusal)
			}
		case errors.As(err, &protocol):
			if protocol.Code != jsonrpc.CodeInvalidParams {
				t.Fatalf("%s(%q): protocol error %v", tool, raw, protocol)
			}
			var v any
			if json.Unmarshal(raw, &v) == nil {
				if _, isObject := v.(map[string]any); isObject {
					t.Fatalf("%s(%q): an object was called a protocol fault", tool, raw)
				}
			}
		default:
			t.Fatalf("%s(%q): %T %v is neither a refusal nor a protocol error", tool, raw, err, err)
		}
	})
}

// FuzzMCPYAML: whatever mcp.yaml holds, reading it for a call never
// panics, and a file isx mcp cannot use refuses the call naming mcp.yaml.
func FuzzMCPYAML(f *testing.F) {
	for _, seed := range []string{
		"", "templates: [tpl-a, tpl-b]\n", "max-instances: 3\nmax-concurrent-tasks: 0\n", "templates: [tpl-a\n",
		"max-instancs: 3\n", "max-instances: lots\n", "max-instances: -1\n", "delegate-max-turns: 200\n",
		"codex:\n  sandbox-mode: read-only\n  sandbox-modes:\n    tpl-a: workspace-write\n",
		"delegate-permission-modes:\n  tpl-review: plan\n", "orphan-grace-hours: 0\n", "summary-model: haiku\n",
		"- a\n- b\n", "templates: &a [*a]\n", "\x00\xff", "templates: [TPL]\n", "? [a]\n: b\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, content []byte) {
		home := t.TempDir()
		path := config.MCPPath(home)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		policy, _, refusal := loadPolicy(home)
		if refusal != nil {
			if refusal.Code != CodeRefused || !strings.Contains(refusal.Message, "mcp.yaml") {
				t.Fatalf("mcp.yaml %q: refusal %v", content, refusal)
			}
			return
		}
		if policy.MaxInstances < 0 || policy.MaxConcurrentTasks < 0 || policy.OrphanGraceHours < 1 {
			t.Fatalf("mcp.yaml %q accepted with %+v", content, policy)
		}
	})
}

// A refusal of arguments names the argument at fault and what is wrong
// with it, whether the schema or a Validate method caught it.
func TestArgumentRefusalsNameTheArgument(t *testing.T) {
	s := offlineServer(t)
	cases := []struct{ tool, raw, want string }{
		{"create_instance", `{"template":"tpl-a","name_hint":"Not_OK"}`, `name_hint "Not_OK" is not allowed`},
		{"create_instance", `{"template":"tpl-a","purpose":"two\nlines"}`, "purpose must be one line"},
		{"create_instance", `{"template":"tpl-a","purpose":"` + strings.Repeat("é", 201) + `"}`, "purpose is 201 characters long"},
		{"create_instance", `{"template":"tpl-a","from_instance":"mcp-a"}`, "not both"},
		{"create_instance", `{}`, "give template"},
		{"create_instance", `{"template":"tpl-a","max_turns":3}`, "max_turns no longer exists"},
		{"exec", `{"instance":"mcp-a","command":"x","timeout_seconds":"soon"}`, "timeout_seconds must be a whole number"},
		{"exec", `{"instance":"mcp-a","command":"x","timeout_seconds":3601}`, "timeout_seconds is 3601; give at most 3600"},
		{"exec", `{"instance":"mcp-a-","command":"x"}`, `instance "mcp-a-" is not allowed`},
		{"exec", `{"instance":"mcp-a","command":"x","idempotency_key":"k"}`, "idempotency_key is for background"},
		{"exec", `{"instance":"mcp-a","command":"x","background":true,"idempotency_key":"a b"}`, `idempotency_key "a b" is not allowed`},
		{"exec", `{"instance":"mcp-a","command":"x","env":{"1BAD":"x"}}`, `env name "1BAD" is not allowed`},
		{"exec", `{"instance":"mcp-a","command":"x","cwd":"rel"}`, `cwd "rel" must be an absolute path`},
		{"exec", `{"instance":"mcp-a","command":"  "}`, "command is empty"},
		{"exec", `{"instance":"mcp-a","command":"x","shell":"bash"}`, `no argument "shell"`},
		{"task_status", `{"instance":"mcp-a","task_id":"t-1"}`, `task_id "t-1" is not allowed`},
		{"task_result", `{"instance":"mcp-a","task_id":"t-abcdefghij","max_bytes":0}`, "max_bytes is 0; give at least 1"},
		{"wait_any", `{"tasks":[]}`, "tasks has 0 items; at least 1 are required"},
		{"wait_any", `{"tasks":[{"instance":"mcp-a","task_id":"x"}]}`, `tasks[0].task_id "x" is not allowed`},
		{"stop_instance", `{"instance":"mcp-a","force":"yes"}`, "force must be true or false"},
	}
	for _, c := range cases {
		err := s.Decode(c.tool, json.RawMessage(c.raw))
		refusal := coded.Of(err)
		if refusal == nil || refusal.Code != CodeInvalidArgument || !strings.Contains(refusal.Message, c.want) {
			t.Errorf("%s(%s) = %v, want invalid_argument saying %q", c.tool, c.raw, err, c.want)
		}
	}
	for _, raw := range []string{`{"instance":"mcp-dev-work-abcde","command":"make"}`, `{"instance":"a","command":"x","background":true,"idempotency_key":"job-1"}`} {
		if err := s.Decode("exec", json.RawMessage(raw)); err != nil {
			t.Errorf("exec(%s) = %v", raw, err)
		}
	}
}
