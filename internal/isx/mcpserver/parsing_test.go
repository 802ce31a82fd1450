package mcpserver

import (
	"strings"
	"testing"
)

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
