package mcpserver

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/instance"
)

// The instance lifecycle end to end on busybox: list_templates,
// create_instance, list_instances, exec in the foreground, keep, stop,
// start, a fork with from_instance, destroy.
//
// ISX-001, ISX-010, ISX-011, ISX-012, ISX-017, ISX-018, ISX-019, ISX-024, ISX-026, ISX-032, ISX-034,
// ISX-036, ISX-038, ISX-040, ISX-043, ISX-053, ISX-054, ISX-055, ISX-061, ISX-200.
func TestInstanceLifecycle(t *testing.T) {
	e := newEnv(t, buildtest.BusyBox, buildtest.BusyBoxChild)
	e.writeMCP("templates: [tpl-test-busybox-child, tpl-test-busybox]\nmax-instances: 5\nmax-concurrent-tasks: 3\norphan-grace-hours: 2\n")
	s := e.start(sessionOptions{})

	var templates ListTemplatesResult
	listed := s.ok("list_templates", map[string]any{}, &templates)
	// ISX-070: every template has default_delegate_agent and
	// summary_agent, empty without an agent for them.
	for _, raw := range listed["templates"].([]any) {
		for _, key := range []string{"default_delegate_agent", "summary_agent"} {
			if agent, ok := raw.(map[string]any)[key]; !ok || agent != "" {
				t.Errorf("%s of a template without agents: %v (present %v)", key, agent, ok)
			}
		}
	}
	if templates.MaxInstances != 5 || templates.MaxConcurrentTasks != 3 || templates.OrphanGraceHours != 2 {
		t.Errorf("limits = %+v", templates)
	}
	var names []string
	for _, tpl := range templates.Templates {
		names = append(names, tpl.Template)
	}
	if !slices.Equal(names, []string{"tpl-test-busybox-child", "tpl-test-busybox"}) {
		t.Fatalf("templates = %v, want mcp.yaml's", names)
	}
	child := templates.Templates[0]
	if !child.Usable || !child.Built || child.Stale || child.Source != "search-path" {
		t.Errorf("child template = %+v", child)
	}
	// A template without agents has no descriptors (delegate_test.go
	// reads those of the agents' template).
	for _, tpl := range templates.Templates {
		if tpl.DefaultDelegateAgent != "" || len(tpl.DelegateAgents) != 0 || tpl.SupportsAsk {
			t.Errorf("a template without agents has delegate descriptors: %+v", tpl)
		}
	}

	// ISX-034: no network, credential or resource choices.
	for prop := range s.tools["create_instance"].InputSchema.(map[string]any)["properties"].(map[string]any) {
		if regexp.MustCompile(`network|credential|account|cpu|memory|limit|profile`).MatchString(prop) {
			t.Errorf("create_instance takes %s", prop)
		}
	}

	var made CreateInstanceResult
	s.ok("create_instance", map[string]any{"template": "tpl-test-busybox-child", "name_hint": "870-impl", "purpose": "#870 implement"}, &made)
	if !regexp.MustCompile(`^mcp-test-busybox-child-870-impl-[a-z2-7]{5}$`).MatchString(made.Instance) {
		t.Errorf("name %q does not follow mcp-<template>-<hint>-<suffix>", made.Instance)
	}
	if made.Replayed || made.State != InstanceReady || made.Status != "running" || made.Template != "tpl-test-busybox-child" {
		t.Errorf("create_instance = %+v", made)
	}
	cfg := e.instanceConfig(made.Instance)
	stamps := instance.ParseStamps(cfg)
	if stamps.MCP.Owner == "" || stamps.Owner != stamps.MCP.Owner || stamps.MCP.Session != s.sessionID() ||
		stamps.MCP.Purpose != "#870 implement" || stamps.MCP.Caller != "isxmcp-test/1.0" || stamps.Template != "tpl-test-busybox-child" {
		t.Errorf("stamps = %+v", stamps)
	}
	if cfg[instance.KeyMCPState] != "" {
		t.Errorf("a ready instance still says %q", cfg[instance.KeyMCPState])
	}
	if got := stamps.MCP.Label(); got != "held: #870 implement" {
		t.Errorf("isx list label = %q", got)
	}
	// ISX-043: the same template and hint give another name.
	var second CreateInstanceResult
	s.ok("create_instance", map[string]any{"template": "tpl-test-busybox-child", "name_hint": "870-impl"}, &second)
	if second.Instance == made.Instance || !strings.HasPrefix(second.Instance, "mcp-test-busybox-child-870-impl-") {
		t.Errorf("second name %q", second.Instance)
	}
	var third CreateInstanceResult
	s.ok("create_instance", map[string]any{"template": "tpl-test-busybox"}, &third)
	if !strings.HasPrefix(third.Instance, "mcp-test-busybox-work-") {
		t.Errorf("default hint: %q", third.Instance)
	}

	// ISX-061: exec runs inside, as the agent, with stdin, env and cwd.
	var run ExecResult
	s.ok("exec", map[string]any{"instance": made.Instance, "command": "echo hi; id -u; pwd; echo $ISX_TEST_LEVEL $GREETING; cat; echo oops >&2; exit 3",
		"stdin": "from stdin\n", "env": map[string]any{"GREETING": "hello"}}, &run)
	if *run.ExitCode != 3 || *run.Stdout != "hi\n1000\n/home/agent\nchild hello\nfrom stdin\n" || *run.Stderr != "oops\n" || *run.TimedOut || run.Background {
		t.Errorf("exec = %+v stdout %q stderr %q", run, *run.Stdout, *run.Stderr)
	}
	if _, err := os.Stat("/home/agent/agent-step.txt"); err == nil {
		t.Error("the command ran on the host")
	}
	s.ok("exec", map[string]any{"instance": made.Instance, "command": "pwd", "cwd": "/etc/isx-test"}, &run)
	if *run.Stdout != "/etc/isx-test\n" {
		t.Errorf("cwd: %q", *run.Stdout)
	}
	s.ok("exec", map[string]any{"instance": made.Instance, "command": "sleep 30", "timeout_seconds": 1}, &run)
	if !*run.TimedOut || *run.ExitCode != 137 {
		t.Errorf("timeout: %+v", run)
	}
	s.ok("exec", map[string]any{"instance": made.Instance, "command": "head -c 5000 /dev/zero | tr '\\0' x", "max_output_bytes": 100}, &run)
	if len(*run.Stdout) != 100 || *run.StdoutBytes != 5000 || !*run.Truncated {
		t.Errorf("max_output_bytes: %d bytes kept of %d, truncated %v", len(*run.Stdout), *run.StdoutBytes, *run.Truncated)
	}
	if ps := e.execIn(made.Instance, "ps -o args"); strings.Contains(ps, "sleep 30") {
		t.Errorf("the timed-out command still runs:\n%s", ps)
	}

	// ISX-053: list_instances shows this session's instances.
	var list ListInstancesResult
	s.ok("list_instances", map[string]any{}, &list)
	if list.Session != s.sessionID() || len(list.Instances) != 3 || list.MaxInstances != 5 {
		t.Fatalf("list_instances = %+v", list)
	}
	for _, i := range list.Instances {
		if i.State != InstanceReady || i.Status != "running" || i.Kept {
			t.Errorf("listed %+v", i)
		}
	}

	// ISX-054: keep_instance marks it kept; destroy_instance then refuses.
	var kept KeepInstanceResult
	s.ok("keep_instance", map[string]any{"instance": second.Instance}, &kept)
	if !kept.Kept {
		t.Errorf("keep = %+v", kept)
	}
	if label := instance.ParseStamps(e.instanceConfig(second.Instance)).MCP.Label(); label != "kept" {
		t.Errorf("kept label = %q", label)
	}
	s.refused("destroy_instance", map[string]any{"instance": second.Instance}, CodeWrongState)

	// stop, then a fork of the stopped instance, then start.
	var stopped StopInstanceResult
	s.ok("stop_instance", map[string]any{"instance": made.Instance}, &stopped)
	if stopped.Status != "stopped" {
		t.Errorf("stop = %+v", stopped)
	}
	s.refused("exec", map[string]any{"instance": made.Instance, "command": "true"}, CodeWrongState)
	var fork CreateInstanceResult
	s.ok("create_instance", map[string]any{"from_instance": made.Instance, "name_hint": "fork"}, &fork)
	if fork.Template != "tpl-test-busybox-child" || !strings.HasPrefix(fork.Instance, "mcp-test-busybox-child-fork-") {
		t.Errorf("fork = %+v", fork)
	}
	var started StartInstanceResult
	s.ok("start_instance", map[string]any{"instance": made.Instance}, &started)
	if started.Status != "running" {
		t.Errorf("start = %+v", started)
	}
	s.refused("create_instance", map[string]any{"from_instance": made.Instance}, CodeWrongState)

	// ISX-055: destroy_instance removes it.
	var destroyed DestroyInstanceResult
	s.ok("destroy_instance", map[string]any{"instance": third.Instance}, &destroyed)
	if !destroyed.Destroyed || slices.Contains(e.mcpInstances(), third.Instance) {
		t.Errorf("destroy = %+v; instances %v", destroyed, e.mcpInstances())
	}
	s.refused("exec", map[string]any{"instance": third.Instance, "command": "true"}, CodeNotFound)
}

// Idempotency keys on create_instance: a repeat asking for another
// template is refused and makes nothing; a kept instance's key is refused;
// once the key's instance is gone the key is free.
//
// ISX-152, ISX-159, ISX-160, ISX-163, ISX-164, ISX-165, ISX-168, ISX-169.
func TestCreateKeysISX164(t *testing.T) {
	e := newEnv(t, buildtest.BusyBox, buildtest.BusyBoxChild)
	e.writeMCP("templates: [tpl-test-busybox, tpl-test-busybox-child]\n")
	s := e.start(sessionOptions{})
	var first, again CreateInstanceResult
	s.ok("create_instance", map[string]any{"template": "tpl-test-busybox", "idempotency_key": "k1"}, &first)
	s.ok("create_instance", map[string]any{"template": "tpl-test-busybox", "idempotency_key": "k1", "name_hint": "other"}, &again)
	if again.Instance != first.Instance || !again.Replayed || again.Adopted || first.Replayed {
		t.Fatalf("repeat = %+v, first = %+v", again, first)
	}
	meta := s.refused("create_instance", map[string]any{"template": "tpl-test-busybox-child", "idempotency_key": "k1"}, CodeInvalidArgument)
	if meta["instance"] != first.Instance {
		t.Errorf("meta = %v", meta)
	}
	if n := len(e.mcpInstances()); n != 1 {
		t.Fatalf("%d instances after a mismatched repeat", n)
	}
	// ISX-169.
	s.ok("keep_instance", map[string]any{"instance": first.Instance}, nil)
	meta = s.refused("create_instance", map[string]any{"template": "tpl-test-busybox", "idempotency_key": "k1"}, CodeWrongState)
	if !strings.Contains(meta["message"].(string), "keep_instance") || meta["instance"] != first.Instance {
		t.Errorf("kept key refusal: %v", meta)
	}
	// ISX-164: the key is free once what it made is gone.
	s.ok("create_instance", map[string]any{"template": "tpl-test-busybox", "idempotency_key": "k2"}, &first)
	s.ok("destroy_instance", map[string]any{"instance": first.Instance}, nil)
	s.ok("create_instance", map[string]any{"template": "tpl-test-busybox", "idempotency_key": "k2"}, &again)
	if again.Replayed {
		t.Errorf("a freed key replayed: %+v", again)
	}
	if _, ok := exists(t, e, again.Instance); !ok {
		t.Errorf("%s does not exist", again.Instance)
	}
}
