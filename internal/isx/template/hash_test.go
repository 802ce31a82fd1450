package template

import (
	"regexp"
	"strings"
	"testing"
)

func mustParse(t *testing.T, yaml, path string) *Definition {
	t.Helper()
	d, err := Parse([]byte(yaml), path)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestHashIsStableSHA256(t *testing.T) {
	d := mustParse(t, fullDefinition, "/a/java.yaml")
	h := d.Hash()
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(h) {
		t.Fatalf("hash %q is not hex sha256", h)
	}
	if h != d.Hash() || h != mustParse(t, fullDefinition, "/a/java.yaml").Hash() {
		t.Fatal("hash is not deterministic")
	}
}

// Formatting, comments, key order, flow or block style, explicit defaults
// and the file's location do not change the hash.
func TestHashIgnoresFormatting(t *testing.T) {
	base := mustParse(t, `name: t
description: d
image: isx/debian-12
packages: [jq, git]
run:
  - ls
  - name: two
    run: echo hi
    user: agent
files:
  - path: /etc/x
    content: "x"
    mode: "0644"
env: {B: "2", A: "1"}
tools:
  - name: claude
    model: sonnet
    repos: [https://h/o/r.git]
`, "/one/t.yaml").Hash()
	same := []string{
		`# reordered keys, block style, comments, explicit defaults
tools:
- model: sonnet   # the model
  name: claude
  repos:
  - https://h/o/r.git
env:
  A: "1"
  B: "2"
files:
- owner: root
  mode: '644'
  content: x
  path: /etc/x
run:
- {run: ls, user: root}
- user: agent
  run: "echo hi"
  name: two
packages:
- jq
- git
image: "isx/debian-12"
description: 'd'
name: t
`,
	}
	for i, y := range same {
		if got := mustParse(t, y, "/elsewhere/other-name.yaml").Hash(); got != base {
			t.Errorf("variant %d hashes differently", i)
		}
	}
}

// Changing any field changes the hash.
func TestHashChangesWithEveryField(t *testing.T) {
	const base = `name: t
description: d
image: isx/debian-12
packages: [jq]
run:
  - name: s
    run: ls
files:
  - path: /etc/x
    content: x
env: {A: "1"}
tools:
  - name: claude
    model: sonnet
    repos: [https://h/o/r.git]
    workdir: w
    agent_note: n
`
	seen := map[string]string{mustParse(t, base, "/t.yaml").Hash(): "base"}
	edits := map[string][2]string{
		"name":              {"name: t\n", "name: u\n"},
		"description":       {"description: d\n", "description: e\n"},
		"image":             {"image: isx/debian-12\n", "image: isx/debian-13\n"},
		"image to parent":   {"image: isx/debian-12\n", "parent: tpl-dev\n"},
		"package":           {"packages: [jq]", "packages: [jq2]"},
		"package added":     {"packages: [jq]", "packages: [jq, git]"},
		"package order":     {"packages: [jq]", "packages: [git, jq]"},
		"step name":         {"  - name: s\n", "  - name: S\n"},
		"step run":          {"    run: ls\n", "    run: ls -l\n"},
		"step user":         {"    run: ls\n", "    run: ls\n    user: agent\n"},
		"step added":        {"    run: ls\n", "    run: ls\n  - pwd\n"},
		"file path":         {"path: /etc/x", "path: /etc/y"},
		"file content":      {"content: x", "content: y"},
		"file mode":         {"content: x\n", "content: x\n    mode: \"0600\"\n"},
		"file owner":        {"content: x\n", "content: x\n    owner: agent\n"},
		"env value":         {`env: {A: "1"}`, `env: {A: "2"}`},
		"env name":          {`env: {A: "1"}`, `env: {B: "1"}`},
		"env added":         {`env: {A: "1"}`, `env: {A: "1", B: ""}`},
		"tool name":         {"  - name: claude\n", "  - name: codex\n"},
		"tool model":        {"model: sonnet", "model: opus"},
		"repo url":          {"https://h/o/r.git", "https://h/o/r2.git"},
		"repo path":         {"[https://h/o/r.git]", "[{url: https://h/o/r.git, path: x}]"},
		"workdir":           {"workdir: w", "workdir: v"},
		"agent note":        {"agent_note: n", "agent_note: m"},
		"tool added":        {"    agent_note: n\n", "    agent_note: n\n  - name: pi\n"},
		"text moves fields": {"description: d\n", "description: \"\"\n"},
		"account added":     {"name: t\n", "name: t\naccounts: {claude: work}\n"},
		"account kind":      {"name: t\n", "name: t\naccounts: {openai: work}\n"},
		"account name":      {"name: t\n", "name: t\naccounts: {claude: play}\n"},
	}
	for what, e := range edits {
		if !strings.Contains(base, e[0]) {
			t.Fatalf("%s: base lacks %q", what, e[0])
		}
		h := mustParse(t, strings.Replace(base, e[0], e[1], 1), "/t.yaml").Hash()
		if prev, dup := seen[h]; dup {
			t.Errorf("changing %s gives the same hash as %s", what, prev)
		}
		seen[h] = what
	}
}

func TestHashDistinguishesUnsetModeFromZero(t *testing.T) {
	a := &Definition{Name: "t", Image: "x", Files: []File{{Path: "/a"}}}
	b := &Definition{Name: "t", Image: "x", Files: []File{{Path: "/a", HasMode: true}}}
	if a.Hash() == b.Hash() {
		t.Error("unset mode and mode 0000 hash the same")
	}
}

func TestHashIsUnambiguousAcrossFieldBoundaries(t *testing.T) {
	a := &Definition{Name: "t", Image: "x", Packages: []string{"ab", "c"}}
	b := &Definition{Name: "t", Image: "x", Packages: []string{"a", "bc"}}
	c := &Definition{Name: "t", Image: "x", Env: map[string]string{"A": "b:1"}}
	d := &Definition{Name: "t", Image: "x", Env: map[string]string{"A:b": "1"}}
	if a.Hash() == b.Hash() || c.Hash() == d.Hash() {
		t.Error("different contents share a hash")
	}
}
