package template

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/yamltree"
)

const fullDefinition = `# a comment that does not matter
name: tpl-java
description: Java tooling
image: ./images/debian.tar.gz
packages: [openjdk-17-jdk, maven, g++]
run:
  - apt-get clean
  - name: warm the cache
    run: |
      mvn -v
    user: agent
  - {run: "true", user: root}
files:
  - path: /etc/motd
    content: hello
  - path: /home/agent/.m2/settings.xml
    content: "<settings/>"
    mode: "0600"
    owner: agent
  - path: /usr/local/bin/x
    content: ""
    mode: 0755
env:
  JAVA_HOME: /usr/lib/jvm/java-17
  PORT: 8080
  EMPTY:
tools:
  - name: claude
    model: sonnet
    repos:
      - https://github.com/example/app.git
      - {url: "git@github.com:example/lib.git", path: src/lib}
    workdir: app
    agent_note: Run mvn verify before you finish.
  - name: codex
    model: gpt-5-codex
accounts:
  claude: work
  github: bot-1
`

func TestParseReadsEveryField(t *testing.T) {
	d, err := Parse([]byte(fullDefinition), "/defs/java.yaml")
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, got, want any) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	check("name", d.Name, "tpl-java")
	check("description", d.Description, "Java tooling")
	check("image", d.Image, "./images/debian.tar.gz")
	check("image file", d.ImageFile, "/defs/images/debian.tar.gz")
	check("image alias", d.ImageAlias(), "")
	check("packages", d.Packages, []string{"openjdk-17-jdk", "maven", "g++"})
	check("steps", len(d.Run), 3)
	check("step 0", d.Run[0], Step{Run: "apt-get clean", User: UserRoot})
	check("step 1", d.Run[1], Step{Name: "warm the cache", Run: "mvn -v\n", User: UserAgent})
	check("step 2", d.Run[2], Step{Run: "true", User: UserRoot})
	check("files", len(d.Files), 3)
	check("file 0", d.Files[0], File{Path: "/etc/motd", Content: "hello", Owner: UserRoot})
	check("file 1", d.Files[1], File{Path: "/home/agent/.m2/settings.xml", Content: "<settings/>", Mode: 0o600, HasMode: true, Owner: UserAgent})
	check("file 2 mode", d.Files[2].Mode, 0o755)
	check("env", d.Env, map[string]string{"JAVA_HOME": "/usr/lib/jvm/java-17", "PORT": "8080", "EMPTY": ""})
	check("tools", len(d.Tools), 2)
	claude, ok := d.Tool(ToolClaude)
	check("claude present", ok, true)
	check("claude model", claude.Model, "sonnet")
	check("claude repos", claude.Repos, []Repo{{URL: "https://github.com/example/app.git"}, {URL: "git@github.com:example/lib.git", Path: "src/lib"}})
	check("repo dirs", claude.Repos[0].Dir()+" "+claude.Repos[1].Dir(), "app src/lib")
	check("workdir", claude.Workdir, "app")
	check("note", claude.AgentNote, "Run mvn verify before you finish.")
	check("accounts", d.Accounts, map[string]string{AccountClaude: "work", AccountGitHub: "bot-1"})
	check("source path", d.Source.Path, "/defs/java.yaml")
	check("parse alone never trusts", d.Source.Trusted, false)
	check("not project-local", d.ProjectLocal(), false)
}

func TestParseImageForms(t *testing.T) {
	cases := []struct {
		image, alias, file string
	}{
		{"isx/debian-12", "isx/debian-12", ""},
		{"debian12", "debian12", ""},
		{"/srv/images/deb.tar.gz", "", "/srv/images/deb.tar.gz"},
		{"../shared/deb.tar.xz", "", "/shared/deb.tar.xz"},
		{"deb.tar.gz", "", "/defs/deb.tar.gz"},
		{"sub/deb.tgz", "", "/defs/sub/deb.tgz"},
	}
	for _, c := range cases {
		d, err := Parse([]byte("name: t\nimage: "+c.image+"\n"), "/defs/t.yaml")
		if err != nil {
			t.Fatalf("%s: %v", c.image, err)
		}
		if d.ImageAlias() != c.alias || d.ImageFile != c.file || d.Image != c.image {
			t.Errorf("%s: alias %q file %q, want %q %q", c.image, d.ImageAlias(), d.ImageFile, c.alias, c.file)
		}
	}
}

func TestParseParentTemplate(t *testing.T) {
	d, err := Parse([]byte("name: tpl-child\nparent: tpl-dev\npackages: [jq]\n"), "/x/c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if d.Parent != "tpl-dev" || d.Image != "" || d.ImageAlias() != "" {
		t.Errorf("parent %q image %q", d.Parent, d.Image)
	}
}

// Every error names the file, the line and the field or key at fault, with
// a typed code.
func TestParseErrors(t *testing.T) {
	const path = "/home/u/.config/incus-spawn/images/t.yaml"
	cases := []struct {
		name  string
		yaml  string
		code  string
		line  int
		field string // must appear in the error text
		text  string // must appear in the error text
	}{
		{"malformed yaml", "name: t\nimage: x\nrun: [a\n", CodeInvalid, 3, "", "not valid YAML"},
		{"tab indentation", "name: t\nimage: x\nenv:\n\tA: b\n", CodeInvalid, 4, "", "not valid YAML"},
		{"bad indentation", "name: t\n  image: x\n", CodeInvalid, 2, "", "not valid YAML"},
		{"top level list", "- name: t\n", CodeInvalid, 1, "", "must be a mapping"},
		{"top level text", "just text\n", CodeInvalid, 1, "", "must be a mapping"},
		{"empty file", "", CodeInvalid, 0, "", "is empty"},
		{"only comments", "# nothing\n", CodeInvalid, 0, "", "is empty"},
		{"two documents", "name: a\nimage: x\n---\nname: b\nimage: y\n", CodeInvalid, 3, "", "more than one YAML document"},
		{"unknown top key", "name: t\nimagee: x\n", CodeInvalid, 2, "imagee", `unknown key "imagee"`},
		{"unknown step key", "name: t\nimage: x\nrun:\n  - run: ls\n    usr: agent\n", CodeInvalid, 5, "run[0].usr", `unknown key "usr"`},
		{"unknown file key", "name: t\nimage: x\nfiles:\n  - path: /a\n    contents: x\n", CodeInvalid, 5, "files[0].contents", "unknown key"},
		{"unknown tool key", "name: t\nimage: x\ntools:\n  - name: claude\n    modle: opus\n", CodeInvalid, 5, "tools[0].modle", "unknown key"},
		{"unknown repo key", "name: t\nimage: x\ntools:\n  - name: claude\n    repos:\n      - {url: https://h/r.git, branch: main}\n", CodeInvalid, 6, "tools[0].repos[0].branch", "unknown key"},
		{"retired max_turns", "name: t\nimage: x\ntools:\n  - name: claude\n    max_turns: 3\n", CodeInvalid, 5, "tools[0].max_turns", "unknown key"},
		{"unknown account kind", "name: t\nimage: x\naccounts:\n  gitlab: me\n", CodeInvalid, 4, "accounts.gitlab", "unknown key"},
		{"bad account name", "name: t\nimage: x\naccounts:\n  claude: Work Account\n", CodeInvalid, 4, "accounts.claude", "not an account name"},
		{"accounts as list", "name: t\nimage: x\naccounts: [claude]\n", CodeInvalid, 3, "accounts", "must be a mapping"},
		{"duplicate key", "name: t\nimage: x\nname: u\n", CodeInvalid, 3, "name", "appears twice (first on line 1)"},
		{"missing name", "image: x\n", CodeInvalid, 1, "name", "is missing"},
		{"null name", "name:\nimage: x\n", CodeInvalid, 1, "name", "is missing"},
		{"name as list", "name: [a]\nimage: x\n", CodeInvalid, 1, "name", "must be text"},
		{"name uppercase", "name: Tpl\nimage: x\n", CodeInvalid, 1, "name", "not a template name"},
		{"name underscore", "name: tpl_dev\nimage: x\n", CodeInvalid, 1, "name", "not a template name"},
		{"name leading hyphen", "name: -tpl\nimage: x\n", CodeInvalid, 1, "name", "not a template name"},
		{"name trailing hyphen", "name: tpl-\nimage: x\n", CodeInvalid, 1, "name", "ends with a hyphen"},
		{"name double hyphen", "name: a--b\nimage: x\n", CodeInvalid, 1, "name", `"--"`},
		{"name digits", "name: \"123\"\nimage: x\n", CodeInvalid, 1, "name", "all digits"},
		{"name too long", "name: " + strings.Repeat("a", 41) + "\nimage: x\n", CodeInvalid, 1, "name", "at most 40"},
		{"parent and image", "name: t\nparent: p\nimage: x\n", CodeInvalid, 3, "image", "together with `parent` (line 2)"},
		{"neither parent nor image", "name: t\n", CodeInvalid, 1, "image", "either `image`"},
		{"parent is itself", "name: t\nparent: t\n", CodeCycle, 2, "parent", "the template itself"},
		{"bad parent name", "name: t\nparent: Other\n", CodeInvalid, 2, "parent", "not a template name"},
		{"remote image", "name: t\nimage: images:debian/12\n", CodeInvalid, 2, "image", "remote image"},
		{"tilde image", "name: t\nimage: ~/deb.tar.gz\n", CodeInvalid, 2, "image", "does not expand"},
		{"bad alias", "name: t\nimage: debian 12\n", CodeInvalid, 2, "image", "neither an Incus image alias"},
		{"packages not list", "name: t\nimage: x\npackages: jq\n", CodeInvalid, 3, "packages", "must be a list"},
		{"bad package", "name: t\nimage: x\npackages: [jq, Foo]\n", CodeInvalid, 3, "packages[1]", "not a Debian package name"},
		{"package option", "name: t\nimage: x\npackages: [--force-yes]\n", CodeInvalid, 3, "packages[0]", "not a Debian package name"},
		{"run not list", "name: t\nimage: x\nrun: ls\n", CodeInvalid, 3, "run", "must be a list"},
		{"bad user", "name: t\nimage: x\nrun:\n  - run: ls\n    user: admin\n", CodeInvalid, 5, "run[0].user", "use root or agent"},
		{"empty step", "name: t\nimage: x\nrun:\n  - \"  \"\n", CodeInvalid, 4, "run[0]", "is empty"},
		{"step without run", "name: t\nimage: x\nrun:\n  - name: x\n", CodeInvalid, 4, "run[0].run", "is missing"},
		{"step is a list", "name: t\nimage: x\nrun:\n  - [ls]\n", CodeInvalid, 4, "run[0]", "shell command or a mapping"},
		{"null step", "name: t\nimage: x\nrun:\n  -\n", CodeInvalid, 4, "run[0]", "shell command or a mapping"},
		{"step name two lines", "name: t\nimage: x\nrun:\n  - name: \"a\\nb\"\n    run: ls\n", CodeInvalid, 4, "run[0].name", "single line"},
		{"step with NUL", "name: t\nimage: x\nrun:\n  - \"ls\\0\"\n", CodeInvalid, 4, "run[0]", "NUL"},
		{"file not mapping", "name: t\nimage: x\nfiles:\n  - /etc/motd\n", CodeInvalid, 4, "files[0]", "must be a mapping"},
		{"file without path", "name: t\nimage: x\nfiles:\n  - content: x\n", CodeInvalid, 4, "files[0].path", "is missing"},
		{"relative file path", "name: t\nimage: x\nfiles:\n  - path: etc/motd\n", CodeInvalid, 4, "files[0].path", "not an absolute path"},
		{"unclean file path", "name: t\nimage: x\nfiles:\n  - path: /etc/../motd\n", CodeInvalid, 4, "files[0].path", "not a clean path"},
		{"root as file", "name: t\nimage: x\nfiles:\n  - path: /\n", CodeInvalid, 4, "files[0].path", "names a directory"},
		{"duplicate file", "name: t\nimage: x\nfiles:\n  - path: /a\n  - path: /a\n", CodeInvalid, 5, "files[1].path", "line 4"},
		{"bad mode", "name: t\nimage: x\nfiles:\n  - path: /a\n    mode: \"0999\"\n", CodeInvalid, 5, "files[0].mode", "not a file mode"},
		{"symbolic mode", "name: t\nimage: x\nfiles:\n  - path: /a\n    mode: rw-r--r--\n", CodeInvalid, 5, "files[0].mode", "not a file mode"},
		{"bad owner", "name: t\nimage: x\nfiles:\n  - path: /a\n    owner: nobody\n", CodeInvalid, 5, "files[0].owner", "use root or agent"},
		{"env not mapping", "name: t\nimage: x\nenv: [A]\n", CodeInvalid, 3, "env", "must be a mapping"},
		{"bad env name", "name: t\nimage: x\nenv:\n  1ABC: x\n", CodeInvalid, 4, "env.1ABC", "not an environment variable name"},
		{"env name with dash", "name: t\nimage: x\nenv:\n  MY-VAR: x\n", CodeInvalid, 4, "env.MY-VAR", "not an environment variable name"},
		{"env value list", "name: t\nimage: x\nenv:\n  A: [x]\n", CodeInvalid, 4, "env.A", "must be text"},
		{"tools not list", "name: t\nimage: x\ntools: claude\n", CodeInvalid, 3, "tools", "must be a list"},
		{"tool shorthand", "name: t\nimage: x\ntools: [claude]\n", CodeInvalid, 3, "tools[0]", "must be a mapping"},
		{"unknown tool", "name: t\nimage: x\ntools:\n  - name: cursor\n", CodeInvalid, 4, "tools[0].name", "not a tool isx installs"},
		{"tool without name", "name: t\nimage: x\ntools:\n  - model: x\n", CodeInvalid, 4, "tools[0].name", "is missing"},
		{"tool twice", "name: t\nimage: x\ntools:\n  - name: claude\n  - name: claude\n", CodeInvalid, 5, "tools[1].name", "at most one entry per tool"},
		{"bad model", "name: t\nimage: x\ntools:\n  - name: claude\n    model: --dangerous\n", CodeInvalid, 5, "tools[0].model", "not a model name"},
		{"empty model", "name: t\nimage: x\ntools:\n  - name: claude\n    model: \"\"\n", CodeInvalid, 5, "tools[0].model", "not a model name"},
		{"repos not list", "name: t\nimage: x\ntools:\n  - name: claude\n    repos: https://h/r\n", CodeInvalid, 5, "tools[0].repos", "must be a list"},
		{"ext transport", "name: t\nimage: x\ntools:\n  - name: codex\n    repos: [\"ext::sh\"]\n", CodeInvalid, 5, "tools[0].repos[0]", "transport"},
		{"option as url", "name: t\nimage: x\ntools:\n  - name: codex\n    repos: [--upload-pack=x]\n", CodeInvalid, 5, "tools[0].repos[0]", "starts with '-'"},
		{"file url", "name: t\nimage: x\ntools:\n  - name: codex\n    repos: [\"file:///etc\"]\n", CodeInvalid, 5, "tools[0].repos[0]", "scheme"},
		{"not a url", "name: t\nimage: x\ntools:\n  - name: codex\n    repos: [just-words]\n", CodeInvalid, 5, "tools[0].repos[0]", "not a repository URL"},
		{"repo without url", "name: t\nimage: x\ntools:\n  - name: codex\n    repos:\n      - path: src\n", CodeInvalid, 6, "tools[0].repos[0].url", "is missing"},
		{"repo path climbs", "name: t\nimage: x\ntools:\n  - name: codex\n    repos:\n      - {url: https://h/r, path: ../etc}\n", CodeInvalid, 6, "tools[0].repos[0].path", `".."`},
		{"same clone dir", "name: t\nimage: x\ntools:\n  - name: pi\n    repos: [https://a/x/r.git, git@b:y/r.git]\n", CodeInvalid, 5, "tools[0].repos[1]", "line 5"},
		{"workdir tilde", "name: t\nimage: x\ntools:\n  - name: opencode\n    workdir: ~/src\n", CodeInvalid, 5, "tools[0].workdir", "leading - or ~"},
		{"alias", "name: &n t\nimage: x\ndescription: *n\n", CodeInvalid, 3, "description", "aliases"},
		{"merge key", "name: t\nimage: x\nenv:\n  <<: {A: b}\n", CodeInvalid, 4, "env.<<", "merge keys"},
		{"custom tag", "name: t\nimage: !custom x\n", CodeInvalid, 2, "image", "tag"},
		{"binary tag", "name: t\nimage: x\nfiles:\n  - path: /a\n    content: !!binary aGk=\n", CodeInvalid, 5, "files[0].content", "tag"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml), path)
			if err == nil {
				t.Fatalf("no error for:\n%s", c.yaml)
			}
			var te *Error
			if !errors.As(err, &te) {
				t.Fatalf("error %T is not a *template.Error: %v", err, err)
			}
			if te.Code != c.code {
				t.Errorf("code %q, want %q (%v)", te.Code, c.code, err)
			}
			if te.File != path {
				t.Errorf("file %q, want %q", te.File, path)
			}
			if te.Line != c.line {
				t.Errorf("line %d, want %d (%v)", te.Line, c.line, err)
			}
			msg := err.Error()
			wantPrefix := path + ":"
			if c.line > 0 {
				wantPrefix = fmt.Sprintf("%s:%d: ", path, c.line)
			}
			if !strings.HasPrefix(msg, wantPrefix) {
				t.Errorf("message %q does not start with %q", msg, wantPrefix)
			}
			if c.field != "" && (!strings.Contains(msg, c.field) || !strings.HasPrefix(te.Key, strings.SplitN(c.field, ".", 2)[0])) {
				t.Errorf("message %q / field %q does not name %q", msg, te.Key, c.field)
			}
			if !strings.Contains(msg, c.text) {
				t.Errorf("message %q does not contain %q", msg, c.text)
			}
		})
	}
}

func TestCheckName(t *testing.T) {
	for _, ok := range []string{"tpl-dev", "a", "0day", "x1", strings.Repeat("a", 40), "tpl-a-b"} {
		if err := CheckName(ok); err != nil {
			t.Errorf("CheckName(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "A", "tpl_dev", "tpl.dev", "-a", "a-", "a--b", "42", strings.Repeat("a", 41), "tpl dev", "tpl/dev"} {
		if err := CheckName(bad); err == nil {
			t.Errorf("CheckName(%q) accepted", bad)
		}
	}
}

func TestParseFileNamesUnreadableFile(t *testing.T) {
	missing := t.TempDir() + "/nope.yaml"
	_, err := ParseFile(missing)
	if coded.CodeOf(err) != CodeUnreadable || !strings.Contains(err.Error(), missing) {
		t.Fatalf("got %v", err)
	}
}

func TestErrorIsMatchesCode(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", &Error{yamltree.Problem(CodeNotApproved, yamltree.Place{}, nil, "x")})
	if !errors.Is(err, &coded.Error{Code: CodeNotApproved}) {
		t.Error("errors.Is by code failed")
	}
	if errors.Is(err, &coded.Error{Code: CodeNotFound}) {
		t.Error("errors.Is matched another code")
	}
	if coded.CodeOf(err) != CodeNotApproved || coded.CodeOf(errors.New("plain")) != "" || coded.CodeOf(nil) != "" {
		t.Error("CodeOf")
	}
}

func TestParseFileResolvesImageAgainstItsDirectory(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "local.yaml")
	if err := os.WriteFile(path, []byte("name: tpl-local\nimage: debian.tar.gz\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if d.ImageFile != filepath.Join(dir, "debian.tar.gz") || d.Source.Path != path {
		t.Fatalf("image file %q source %q", d.ImageFile, d.Source.Path)
	}
}

func TestParsePathsInsideTheInstance(t *testing.T) {
	ok := "name: t\nimage: x\ntools:\n  - name: claude\n    workdir: /srv/app\n    repos: [{url: \"ssh://git@h/r.git\", path: /srv/r}]\n"
	if _, err := Parse([]byte(ok), "/t.yaml"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		"name: t\nimage: x\ntools:\n  - name: claude\n    workdir: -rf\n",
		"name: t\nimage: x\ntools:\n  - name: claude\n    workdir: \"a\\tb\"\n",
		"name: t\nimage: x\ntools:\n  - name: claude\n    workdir: \"\"\n",
		"name: t\nimage: x\nfiles:\n  - path: \"/a\\nb\"\n",
		"name: t\nimage: x\nfiles:\n  - path: /etc/\n",
		"name: t\nimage: \"/a\\tb.tar\"\n",
		"name: t\nimage: x\ntools:\n  - name: claude\n    repos: [\"https://\"]\n",
	} {
		if _, err := Parse([]byte(bad), "/t.yaml"); coded.CodeOf(err) != CodeInvalid {
			t.Errorf("accepted or wrong error (%v):\n%s", err, bad)
		}
	}
}

func TestBuiltinDefinitionCannotUseRelativeImage(t *testing.T) {
	_, err := parse([]byte("name: t\nimage: ./x.tar.gz\n"), builtinPath("t.yaml"), "")
	if coded.CodeOf(err) != CodeInvalid || !strings.Contains(err.Error(), "built-in") {
		t.Fatalf("got %v", err)
	}
}

// A child's entry for an agent tool replaces its parent's in the parent's
// place; tools only the child has come after.
func TestMergeToolsChildReplacesParent(t *testing.T) {
	parent := &Definition{Tools: []Tool{{Name: ToolClaude, Model: "sonnet"}, {Name: ToolCodex}}}
	child := &Definition{Tools: []Tool{{Name: ToolPi}, {Name: ToolClaude, Model: "opus"}}}
	got := MergeTools([]*Definition{parent, child})
	want := []Tool{{Name: ToolClaude, Model: "opus"}, {Name: ToolCodex}, {Name: ToolPi}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("MergeTools = %+v, want %+v", got, want)
	}
	if got := MergeTools(nil); len(got) != 0 {
		t.Errorf("MergeTools(nil) = %+v", got)
	}
}

// A child's account for a kind replaces its parent's; the other kinds
// come down from the parent.
func TestMergeAccountsChildReplacesParent(t *testing.T) {
	parent := &Definition{Accounts: map[string]string{AccountClaude: "team", AccountGitHub: "bot"}}
	child := &Definition{Accounts: map[string]string{AccountClaude: "mine"}}
	got := MergeAccounts([]*Definition{parent, child})
	want := map[string]string{AccountClaude: "mine", AccountGitHub: "bot"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("MergeAccounts = %v, want %v", got, want)
	}
}
