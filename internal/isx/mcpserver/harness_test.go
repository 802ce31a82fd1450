package mcpserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/incusspawn/isx/internal/isx/build"
	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/holding"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/isx/proxy/proxytest"
	"github.com/incusspawn/isx/internal/isx/template"
	"github.com/incusspawn/isx/internal/mcpkit"
	"github.com/incusspawn/isx/internal/mcpkit/anyschema"
	"github.com/incusspawn/isx/internal/testkit"
)

// binary is cmd/isx, built once, on first use (fuzz workers never need
// it): the tests talk to the real program over a real stdio pipe, as
// Claude Code would.
var binary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func isxBinary(t testing.TB) string {
	t.Helper()
	binary.once.Do(func() {
		binary.dir, binary.err = os.MkdirTemp("", "isxmcp-test-")
		if binary.err != nil {
			return
		}
		binary.path = filepath.Join(binary.dir, "isx")
		out, err := exec.Command(goTool(), "build", "-o", binary.path, "github.com/incusspawn/isx/cmd/isx").CombinedOutput()
		if err != nil {
			binary.err = fmt.Errorf("building isx: %w\n%s", err, out)
		}
	})
	if binary.err != nil {
		t.Fatal(binary.err)
	}
	return binary.path
}

func TestMain(m *testing.M) {
	flag.Parse()
	incustest.Main(m, func() {
		shared.mu.Lock()
		if shared.project != "" {
			if err := incustest.RemoveProject(incustest.Client(), shared.project); err != nil {
				fmt.Fprintf(os.Stderr, "removing %s: %v\n", shared.project, err)
			}
		}
		shared.mu.Unlock()
		if binary.dir != "" {
			os.RemoveAll(binary.dir)
		}
	})
}

func goTool() string {
	if path, err := exec.LookPath("go"); err == nil {
		return path
	}
	return "/usr/local/go/bin/go"
}

// The test templates are built once per test binary, in one project, and
// copied (a btrfs snapshot) into each test's own throwaway project.
var shared struct {
	mu      sync.Mutex
	project string
	built   map[string]error
}

func sharedProject(t testing.TB) string {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.project != "" {
		return shared.project
	}
	base := incustest.Require(t)
	raw := make([]byte, 5)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	name := incustest.ProjectPrefix + "mcp" + hex.EncodeToString(raw)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := base.CreateProject(ctx, incus.Project{
		Name: name, Description: "isxmcp tests: built test templates shared by the package's tests",
		Config: map[string]string{
			"features.images": "false", "features.profiles": "false",
			"features.storage.volumes": "false", "features.networks": "false",
			incustest.CreatedKey: time.Now().UTC().Format(time.RFC3339),
		},
	})
	if err != nil {
		t.Fatalf("creating the shared template project: %v", err)
	}
	shared.project = name
	shared.built = map[string]error{}
	return name
}

func testTemplates(t testing.TB) *template.Set {
	t.Helper()
	set, err := template.Load(template.Options{Home: t.TempDir(), SearchPaths: []string{buildtest.Dir(t), buildtest.OthersDir(t)}})
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// builtTemplate makes sure the shared project has the template built.
func builtTemplate(t testing.TB, name string) string {
	t.Helper()
	project := sharedProject(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if err, done := shared.built[name]; done {
		if err != nil {
			t.Fatalf("building %s failed earlier: %v", name, err)
		}
		return project
	}
	set := testTemplates(t)
	chain, err := set.Chain(name)
	if err != nil {
		t.Fatal(err)
	}
	incustest.EnsureImages(t, chain[0].ImageAlias())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	b := &build.Builder{Client: incustest.Client().InProject(project), Set: set, Owner: "isx-test", Out: &progress, NPMCache: buildtest.NPMCache()}
	_, err = b.Build(ctx, build.Request{Templates: []string{name}})
	shared.built[name] = err
	if err != nil {
		t.Fatalf("building %s: %v\n%s", name, err, progress.String())
	}
	return project
}

// env is one test's world: a throwaway Incus project with copies of the
// built templates, and a home whose config.yaml names it.
type env struct {
	t      testing.TB
	client *incus.Client
	home   string
}

func newEnv(t testing.TB, templates ...string) *env {
	t.Helper()
	c := incustest.Project(t)
	e := &env{t: t, client: c, home: proxytest.Home(t)}
	for _, name := range templates {
		e.copyTemplate(name)
	}
	if err := config.Save(e.home, &config.Config{Project: c.ProjectName(), TemplatePaths: []string{buildtest.Dir(t)}}); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) copyTemplate(name string) {
	e.t.Helper()
	from := builtTemplate(e.t, name)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := e.client.CreateInstance(ctx, incus.InstanceCreate{
		Name:   name,
		Source: incus.InstanceSource{Type: "copy", Source: name, Project: from, InstanceOnly: true},
	})
	if err != nil {
		e.t.Fatalf("copying template %s into %s: %v", name, e.client.ProjectName(), err)
	}
}

func (e *env) mcpPath() string { return config.MCPPath(e.home) }

// writeMCP writes mcp.yaml.
func (e *env) writeMCP(content string) {
	e.t.Helper()
	if err := os.MkdirAll(filepath.Dir(e.mcpPath()), 0o700); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(e.mcpPath(), []byte(content), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) auditLog() string {
	return filepath.Join(config.StateDir(e.home), "mcp.log")
}

func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	e.t.Cleanup(cancel)
	return ctx
}

// environ is the test's environment with HOME replaced and no project
// override, so the server works in the project config.yaml names.
func (e *env) environ(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name != "HOME" && name != "ISX_PROJECT" {
			out = append(out, kv)
		}
	}
	return append(append(out, "HOME="+e.home), extra...)
}

// sessionOptions change how a session starts.
type sessionOptions struct {
	protocol string   // default 2025-11-25
	notify   bool     // list isx/task_changed under capabilities.experimental
	env      []string // extra NAME=value for the server
	name     string   // clientInfo.name
	dir      string   // the server's working directory
}

// session is one isx mcp process with a go-sdk client on its stdio.
type session struct {
	t       testing.TB
	cs      *mcp.ClientSession
	cmd     *exec.Cmd
	stderr  *testkit.SyncBuffer
	notes   chan TaskChanged
	tools   map[string]*mcp.Tool
	schemas map[string]*anyschema.Validator
	closed  bool
	id      string

	// malformed are notifications that broke the protocol of
	// TaskChangedMethod; close fails the test with them.
	mu        sync.Mutex
	malformed []string
}

func (e *env) start(opts sessionOptions) *session {
	e.t.Helper()
	if opts.protocol == "" {
		opts.protocol = "2025-11-25"
	}
	if opts.name == "" {
		opts.name = "isxmcp-test"
	}
	cmd := exec.Command(isxBinary(e.t), "mcp")
	cmd.Env = e.environ(opts.env...)
	cmd.Dir = opts.dir
	stderr := &testkit.SyncBuffer{}
	cmd.Stderr = stderr
	s := &session{t: e.t, cmd: cmd, stderr: stderr, notes: make(chan TaskChanged, 256)}
	caps := &mcp.ClientCapabilities{}
	if opts.notify {
		caps.Experimental = map[string]any{TaskChangedCapability: map[string]any{}}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: opts.name, Version: "1.0"}, &mcp.ClientOptions{Capabilities: caps})
	transport := mcpkit.NewListener(&mcp.CommandTransport{Command: cmd, TerminateDuration: 20 * time.Second},
		map[string]func(json.RawMessage){TaskChangedMethod: s.heard})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: opts.protocol})
	if err != nil {
		e.t.Fatalf("connecting to isx mcp: %v\nstderr:\n%s", err, stderr.String())
	}
	s.cs = cs
	if s.id, err = holding.SessionOf(cmd.Process.Pid); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(s.close)
	s.loadTools()
	return s
}

func (s *session) loadTools() {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := s.cs.ListTools(ctx, nil)
	if err != nil {
		s.t.Fatalf("tools/list: %v", err)
	}
	s.tools = map[string]*mcp.Tool{}
	s.schemas = map[string]*anyschema.Validator{}
	for _, tool := range list.Tools {
		s.tools[tool.Name] = tool
		validator, err := anyschema.Compile(tool.OutputSchema)
		if err != nil {
			s.t.Fatalf("compiling the output schema of %s: %v", tool.Name, err)
		}
		s.schemas[tool.Name] = validator
	}
}

// close ends the session cleanly (stdin closed) and waits for the server.
func (s *session) close() {
	if s.closed {
		return
	}
	s.closed = true
	if err := s.cs.Close(); err != nil && !strings.Contains(err.Error(), "signal: killed") {
		s.t.Logf("closing the session: %v", err)
	}
	s.checkServer()
}

// checkServer fails the test when the server sent a malformed task
// notification, or reported a data race (tests run under GOFLAGS=-race
// build the server with the detector too) or a panic.
func (s *session) checkServer() {
	s.mu.Lock()
	for _, problem := range s.malformed {
		s.t.Errorf("isx mcp sent %s", problem)
	}
	s.mu.Unlock()
	if out := s.stderr.String(); strings.Contains(out, "DATA RACE") || strings.Contains(out, "panic:") {
		s.t.Errorf("isx mcp reported:\n%s", out)
	}
}

// kill ends the server with SIGKILL, as a crash would.
func (s *session) kill() {
	s.t.Helper()
	if err := s.cmd.Process.Kill(); err != nil {
		s.t.Fatal(err)
	}
	s.cmd.Process.Wait() //nolint:errcheck // reaped so its pid is gone
	s.closed = true
	s.checkServer()
	go s.cs.Close()
}

// sessionID is the server's session id.
func (s *session) sessionID() string { return s.id }

// call calls a tool. Every result that is not a refusal has its
// structuredContent validated against the tool's listed outputSchema
// (ISX-115) and text for the model (ISX-116).
func (s *session) call(tool string, args any) *mcp.CallToolResult {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		s.t.Fatalf("%s: %v\nserver stderr:\n%s", tool, err, s.stderr.String())
	}
	if !res.IsError {
		s.checkResult(tool, res)
	}
	return res
}

func (s *session) checkResult(tool string, res *mcp.CallToolResult) {
	s.t.Helper()
	if res.StructuredContent == nil {
		s.t.Fatalf("%s: no structuredContent", tool)
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := s.schemas[tool].ValidateJSON(raw); err != nil {
		s.t.Fatalf("%s: structuredContent does not match its outputSchema: %v\n%s", tool, err, raw)
	}
	if strings.TrimSpace(resultText(res)) == "" {
		s.t.Fatalf("%s: no text content for the model", tool)
	}
}

// ok calls a tool, requires success (validated by call), and decodes the
// structured result into out (when not nil).
func (s *session) ok(tool string, args any, out any) map[string]any {
	s.t.Helper()
	res := s.call(tool, args)
	// The Incus daemon is shared with other tests and sometimes too busy
	// to start a container in time; unavailable is the refusal a client
	// may retry unchanged, so this client does, once.
	if res.IsError && (tool == "create_instance" || tool == "start_instance" || tool == "delegate") && refusalCode(res) == string(CodeUnavailable) {
		s.t.Logf("%s: retrying after %s", tool, resultText(res))
		res = s.call(tool, args)
	}
	if res.IsError {
		s.t.Fatalf("%s(%v) was refused: %s\nserver stderr:\n%s", tool, args, resultText(res), s.stderr.String())
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		s.t.Fatal(err)
	}
	if out != nil {
		reflect.ValueOf(out).Elem().SetZero()
		if err := json.Unmarshal(raw, out); err != nil {
			s.t.Fatalf("%s: decoding %s: %v", tool, raw, err)
		}
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		s.t.Fatal(err)
	}
	return m
}

// refused calls a tool and requires a refusal with code (ISX-117, ISX-118, ISX-119):
// isError, no structuredContent, the code in _meta. It returns the
// refusal's details.
func (s *session) refused(tool string, args any, code Code) map[string]any {
	s.t.Helper()
	res := s.call(tool, args)
	return checkRefusal(s.t, tool, res, code)
}

func checkRefusal(t testing.TB, tool string, res *mcp.CallToolResult, code Code) map[string]any {
	t.Helper()
	if !res.IsError {
		raw, _ := json.Marshal(res.StructuredContent)
		t.Fatalf("%s succeeded, want refusal %s: %s", tool, code, raw)
	}
	if res.StructuredContent != nil {
		t.Fatalf("%s: a refusal carries structuredContent", tool)
	}
	meta, ok := res.Meta[ErrorMetaKey].(map[string]any)
	if !ok {
		t.Fatalf("%s: refusal without _meta[%q]: %v", tool, ErrorMetaKey, res.Meta)
	}
	if got := meta["code"]; got != string(code) {
		t.Fatalf("%s: refusal code %v, want %s: %s", tool, got, code, resultText(res))
	}
	if msg, _ := meta["message"].(string); msg == "" {
		t.Fatalf("%s: refusal without a message", tool)
	}
	return meta
}

func refusalCode(res *mcp.CallToolResult) string {
	meta, _ := res.Meta[ErrorMetaKey].(map[string]any)
	code, _ := meta["code"].(string)
	return code
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if text, ok := c.(*mcp.TextContent); ok {
			b.WriteString(text.Text)
		}
	}
	return b.String()
}

// heard takes a task notification, which the go-sdk client has no handler
// for, and hands it to the test. It runs on the connection's read loop, so
// it never blocks and never fails the test itself.
func (s *session) heard(params json.RawMessage) {
	var change TaskChanged
	if err := json.Unmarshal(params, &change); err != nil {
		s.noteMalformed(fmt.Sprintf("a malformed task notification %s: %v", params, err))
		return
	}
	var raw map[string]any
	if json.Unmarshal(params, &raw) == nil {
		if _, has := raw["exit_code"]; has && change.State != TaskFinished && change.State != TaskAttached {
			s.noteMalformed(fmt.Sprintf("a notification that is not finished carrying exit_code: %s", params))
			return
		}
	}
	select {
	case s.notes <- change:
	default:
	}
}

func (s *session) noteMalformed(problem string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.malformed = append(s.malformed, problem)
}

// execIn runs a command in an instance as root, for checks and set-up.
func (e *env) execIn(name string, command string) string {
	e.t.Helper()
	res, err := e.client.Exec(e.ctx(), name, incus.ExecRequest{Command: []string{"sh", "-c", command}, Timeout: time.Minute})
	if err != nil {
		e.t.Fatalf("exec in %s: %v", name, err)
	}
	if res.ExitCode != 0 {
		e.t.Fatalf("exec %q in %s: exit %d: %s%s", command, name, res.ExitCode, res.Stdout, res.Stderr)
	}
	return string(res.Stdout)
}

// instanceConfig reads an instance's config.
func (e *env) instanceConfig(name string) map[string]string {
	e.t.Helper()
	inst, _, err := e.client.GetInstance(e.ctx(), name)
	if err != nil {
		e.t.Fatalf("reading %s: %v", name, err)
	}
	return inst.Config
}

// mcpInstances lists the names of the project's instances with MCP stamps.
func (e *env) mcpInstances() []string {
	e.t.Helper()
	list, err := e.client.Instances(e.ctx())
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, inst := range list {
		if holding.ViewOf(&inst).IsMCP() {
			out = append(out, inst.Name)
		}
	}
	return out
}

func execAsRoot(command string) incus.ExecRequest {
	return incus.ExecRequest{Command: []string{"sh", "-c", command}, Timeout: time.Minute}
}
