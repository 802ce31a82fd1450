package mcpserver

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
)

// A stdio session is alive exactly while its process runs: not once it
// exited (even as an unreaped zombie), not when its pid is reused.
func TestSessionLiveness(t *testing.T) {
	self, err := StdioSession()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(self, "stdio:"+strconv.Itoa(os.Getpid())+":") || !SessionAlive(self) {
		t.Fatalf("own session %q not alive", self)
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	id, err := SessionOf(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if !SessionAlive(id) {
		t.Fatal("a running process's session is dead")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Killed but not reaped: a zombie is gone as far as sessions go.
	incustest.WaitFor(t, "the zombie", 5*time.Second, func() bool { return !SessionAlive(id) })
	cmd.Wait() //nolint:errcheck // killed on purpose
	if SessionAlive(id) {
		t.Fatal("a reaped process's session is alive")
	}
	pid, _, _ := strings.Cut(strings.TrimPrefix(self, "stdio:"), ":")
	if SessionAlive("stdio:" + pid + ":1") {
		t.Fatal("a reused pid (other start time) counts as the same session")
	}
	for _, bad := range []string{"stdio:", "stdio:x:1", "stdio:-1:1", ""} {
		if SessionAlive(bad) {
			t.Errorf("%q is alive", bad)
		}
	}
	if !SessionAlive("instance:coord") {
		t.Error("a session of another kind must count as alive (nothing proves it ended)")
	}
}

// ISX-040, ISX-043: names are mcp-<template without tpl->-<hint>-<suffix>,
// within Incus's 63 characters; a key's suffix is stable, a random one is
// five of a-z2-7.
func TestInstanceNames(t *testing.T) {
	long := "tpl-" + strings.Repeat("a", 36)
	name := instanceName(long, strings.Repeat("h", 16), "abcde")
	if len(name) > 63 || incus.ValidateInstanceName(name) != nil || !strings.HasSuffix(name, "-hhhhhhhhhhhhhhhh-abcde") {
		t.Errorf("long name %q (%d)", name, len(name))
	}
	if got := instanceName("tpl-dev", "870-impl", "x2y3z"); got != "mcp-dev-870-impl-x2y3z" {
		t.Errorf("name %q", got)
	}
	if keySuffix("u", "k") != keySuffix("u", "k") || keySuffix("u", "k") == keySuffix("v", "k") {
		t.Error("key suffixes are not per owner and key")
	}
	suffix, err := randomSuffix(bytes.NewReader([]byte{1, 2, 3, 4}))
	if err != nil || !regexp.MustCompile(`^[a-z2-7]{5}$`).MatchString(suffix) {
		t.Errorf("suffix %q, %v", suffix, err)
	}
}

// get_diff's reading of git's numstat and patch: binary files have null
// counts and are counted apart, a patch longer than max_bytes is marked
// truncated with its whole size, and stat leaves the patch out.
func TestParseDiff(t *testing.T) {
	raw := "numstat 3 1 src/a.go\nnumstat - - img/logo.png\nnumstat 0 7 old file.txt\npatch 5000\ndiff --git a/src/a.go b/src/a.go\n+x"
	out := parseDiff(raw, false)
	if len(out.Files) != 3 || out.Added != 3 || out.Deleted != 8 {
		t.Fatalf("files %+v, +%d -%d", out.Files, out.Added, out.Deleted)
	}
	if bin := out.Files[1]; !bin.Binary || bin.Added != nil || bin.Deleted != nil || bin.Path != "img/logo.png" {
		t.Errorf("binary file %+v", bin)
	}
	if out.Files[2].Path != "old file.txt" {
		t.Errorf("a path with a space: %q", out.Files[2].Path)
	}
	if out.Patch == nil || !strings.HasPrefix(*out.Patch, "diff --git") || !out.Truncated || *out.PatchBytes != 5000 {
		t.Errorf("patch %v, truncated %v, bytes %v", out.Patch, out.Truncated, out.PatchBytes)
	}
	if stat := parseDiff(raw, true); stat.Patch != nil || stat.PatchBytes != nil || len(stat.Files) != 3 {
		t.Errorf("stat = %+v", stat)
	}
	if empty := parseDiff("", true); len(empty.Files) != 0 || empty.Files == nil {
		t.Errorf("no changes = %+v", empty)
	}
}

// A delegate's arguments: instance or template, never both; an
// instruction that is not empty; a path that stays in the checkout.
func TestDelegateArgumentChecks(t *testing.T) {
	for _, bad := range []DelegateArgs{
		{Instruction: "x"},
		{Instruction: "x", Instance: "a", Template: "t"},
		{Instruction: "  ", Template: "t"},
		{Instruction: "x", Instance: "a", Purpose: "p"},
		{Instruction: "x", Template: "t", Cwd: "relative"},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v was accepted", bad)
		}
	}
	for _, path := range []string{"/etc/passwd", "..", "a/../../b", "../x"} {
		if err := (&GetDiffArgs{Path: path}).Validate(); err == nil {
			t.Errorf("get_diff path %q was accepted", path)
		}
	}
	if err := (&GetDiffArgs{Path: "src/a.go"}).Validate(); err != nil {
		t.Errorf("a relative path was refused: %v", err)
	}
}
