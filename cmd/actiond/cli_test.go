package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
	"github.com/incusspawn/isx/internal/testkit"
)

// Every command's --help is a golden file.
func TestHelp(t *testing.T) {
	for _, command := range []string{"", "serve", "token", "sessions", "executions", "execution", "version", "completion"} {
		args := append(strings.Fields(command), "--help")
		out := mustActiond(t, args...)
		name := command
		if name == "" {
			name = "actiond"
		}
		testkit.Golden(t, filepath.Join("help", name+".txt"), out)
	}
}

// A command line actiond cannot make sense of exits 2, as isx's do, and
// says how to get help; a failure exits 1.
func TestUsageExitsTwo(t *testing.T) {
	empty := t.TempDir()
	for name, args := range map[string][]string{
		"unknown command":    {"servee"},
		"unknown flag":       {"serve", "--nope"},
		"arguments to serve": {"serve", "extra"},
		"token subject":      {"token", "--data", empty},
		"token audience":     {"token", "--data", empty, "--subject", "a", "--audience", "console"},
		"bad duration":       {"token", "--ttl", "soon"},
		"execution no ID":    {"execution"},
		"execution two IDs":  {"execution", "a", "b"},
		"limit":              {"executions", "--limit", "0"},
		"access TTL":         {"serve", "--access-token-ttl", "0s"},
		"CORS origin":        {"serve", "--data", empty, "--cors-origin", "http://localhost:6274/"},
		"version argument":   {"version", "now"},
	} {
		r := actiond(t, args...)
		if r.code != 2 || !strings.Contains(r.stderr, "Run `actiond --help` for usage.") || !strings.HasPrefix(r.stderr, "actiond: ") {
			t.Errorf("%s: exit %d, stderr %q", name, r.code, r.stderr)
		}
	}
	if r := actiond(t, "token", "--data", empty, "--subject", "a"); r.code != 1 || strings.Contains(r.stderr, "--help") {
		t.Errorf("a failure: exit %d, stderr %q", r.code, r.stderr)
	}
}

// token refuses a --data without a database instead of making one, and
// names what to do.
func TestTokenRefusesMissingDatabase(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nothing-here")
	r := actiond(t, "token", "--data", dir, "--subject", "ada")
	if r.code != 1 || !strings.Contains(r.stderr, "no actiond database in "+dir) || !strings.Contains(r.stderr, "hint: Pass the --data directory `actiond serve` uses") {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("token made the directory: %v", err)
	}
	opts := storetest.Options(t, store.Postgres)
	r = actiond(t, append([]string{"token", "--subject", "ada"}, at.StoreArgs(opts)...)...)
	if r.code != 1 || !strings.Contains(r.stderr, "no actiond database in the Postgres database") {
		t.Fatalf("Postgres: exit %d: %s", r.code, r.stderr)
	}
	// A database nobody served has no public URL to sign as.
	served := store.Options{DataDir: t.TempDir()}
	st, err := store.Open(context.Background(), served)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	r = actiond(t, "token", "--data", served.DataDir, "--subject", "ada")
	if r.code != 1 || !strings.Contains(r.stderr, "was never served") || !strings.Contains(r.stderr, "actiond serve --data "+served.DataDir) {
		t.Fatalf("never served: exit %d: %s", r.code, r.stderr)
	}
}

var tokenCommandPattern = regexp.MustCompile(`a token for scripts: (actiond token .*)\n`)

// ACT-059, ACT-064: the command serve prints gives a token that serve
// accepts, even when the public URL is not the listen address; token takes
// the issuer and audience from the database, on SQLite and Postgres.
func TestServePrintsTheTokenCommandThatWorks_ACT059_ACT064(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		// A public URL that is not the listen address: tokens must name it.
		_, port, _ := strings.Cut(at.FreeAddr(t), ":")
		public := "http://localhost:" + port
		p := at.StartProcess(t, binary, withSchema(t, storetest.Options(t, d)), public)
		// serve prints its lines one by one, the token command last: it
		// may not be written yet when the process answers.
		var found []string
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		at.Poll(ctx, func() bool {
			found = tokenCommandPattern.FindStringSubmatch(p.Log())
			return found != nil
		})
		if found == nil {
			t.Fatalf("serve printed no token command:\n%s", p.Log())
		}
		args := strings.Fields(found[1])[1:]
		for i, a := range args {
			args[i] = strings.Trim(a, "'")
		}
		args[len(args)-1] = "ada" // --subject <the user running the test>
		token := strings.TrimSpace(mustActiond(t, args...))
		env := p.Env(d)
		if reply := env.Post("default", "", at.Request{Method: "tools/list"}); reply.Status != 401 {
			t.Fatalf("without a token: %s", reply)
		}
		if reply := env.Post("default", token, at.Request{Method: "tools/list"}); reply.Status != 200 {
			t.Fatalf("the printed command's token: %s", reply)
		}
		if !strings.Contains(p.Log(), "database "+map[store.Dialect]string{store.SQLite: "SQLite in ", store.Postgres: "Postgres at "}[d]) {
			t.Errorf("serve does not name its store:\n%s", p.Log())
		}
	})
}

// serve says which store it uses when given both, and warns when the
// database was last served at another public URL.
func TestServeSaysWhichStore(t *testing.T) {
	dataDir := t.TempDir()
	pg := withSchema(t, storetest.Options(t, store.Postgres))
	p := at.StartProcess(t, binary, pg, "", "--data", dataDir)
	if !strings.Contains(p.Log(), "using Postgres at ") || !strings.Contains(p.Log(), "--data "+dataDir+" is ignored") {
		t.Fatalf("log:\n%s", p.Log())
	}
	if entries, _ := os.ReadDir(dataDir); len(entries) != 0 {
		t.Fatalf("--data was written to: %v", entries)
	}
	if !strings.Contains(p.Log(), "a token for scripts: actiond token --postgres ") {
		t.Fatalf("the token command does not name Postgres:\n%s", p.Log())
	}
	p.Stop()
	again := at.StartProcess(t, binary, pg, "http://localhost:1")
	if !strings.Contains(again.Log(), "this database was last served at "+p.PublicURL) {
		t.Fatalf("no warning about the replaced public URL:\n%s", again.Log())
	}
}

// serve names the data directory, its mode and owner, and the user it runs
// as when it may not open its database.
func TestServeNamesPathAndPermission(t *testing.T) {
	// Under /tmp itself, so that the other user can reach the directory.
	parent, err := os.MkdirTemp("/tmp", "actiond-permission-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(parent, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "serve", "--addr", at.FreeAddr(t), "--data", data)
	cmd.Env = environment()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	exit, _ := err.(*exec.ExitError)
	if exit == nil || exit.ExitCode() != 1 {
		t.Fatalf("serve as nobody: %v\n%s", err, out)
	}
	for _, want := range []string{"cannot read and write the data directory " + data, "mode 0700", "owner uid 0", "runs as uid 65534", "permission denied", "hint: Give that user read and write permission on " + data} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the message lacks %q:\n%s", want, out)
		}
	}
}

// ACT-065, ACT-066: a 401's body says which kind of check failed, through
// the real binary: missing, malformed, wrong audience, unknown issuer,
// invalid signature.
func TestUnauthorizedSaysWhy_ACT065_ACT066(t *testing.T) {
	p := serve(t, store.SQLite)
	other := serve(t, store.SQLite)
	env := p.Env(store.SQLite)
	graphql := strings.TrimSpace(mustActiond(t, append([]string{"token", "--subject", "ada", "--audience", "graphql"}, at.StoreArgs(p.Store)...)...))
	foreign := other.Token("local", "ada")
	valid := p.Token("local", "ada")
	for token, reason := range map[string]string{
		"":                           "missing",
		"garbage":                    "malformed",
		graphql:                      "wrong_audience",
		foreign:                      "unknown_issuer",
		valid[:len(valid)-3] + "AAA": "invalid_signature",
	} {
		reply := env.Post("default", token, at.Request{Method: "tools/list"})
		if reply.Status != 401 || at.Dig(reply.RPC, "error", "data", "reason") != reason {
			t.Errorf("reason %s: %s", reason, reply)
		}
		if strings.Contains(string(reply.Body), other.URL) || strings.Contains(string(reply.Body), "/mcp\"") {
			t.Errorf("reason %s: the body names an issuer or audience: %s", reason, reply.Body)
		}
	}
}

// version prints the version, Go and platform, as text and JSON;
// --version says the same.
func TestVersion(t *testing.T) {
	text := mustActiond(t, "version")
	if !regexp.MustCompile(`^actiond \S+ \(([0-9a-f]{12}, \S+(, modified)?|commit unknown: built without VCS information)\) go\d+\.\d+\S* linux/\w+\n$`).MatchString(text) {
		t.Fatalf("version %q", text)
	}
	if flag := mustActiond(t, "--version"); flag != text {
		t.Fatalf("--version %q differs from version %q", flag, text)
	}
	var info map[string]any
	if err := json.Unmarshal([]byte(mustActiond(t, "version", "--json")), &info); err != nil {
		t.Fatal(err)
	}
	if info["version"] == "" || !strings.HasPrefix(info["go"].(string), "go") || info["platform"] == "" {
		t.Fatalf("version --json %v", info)
	}
}

// Completion scripts are generated for bash, zsh, fish and PowerShell;
// bash's parses and registers itself; flags and values complete.
func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		script := mustActiond(t, "completion", shell)
		if !strings.Contains(script, "actiond") || len(script) < 500 {
			t.Errorf("%s: script %q", shell, script)
		}
	}
	script := filepath.Join(t.TempDir(), "actiond.bash")
	if err := os.WriteFile(script, []byte(mustActiond(t, "completion", "bash")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bash", "-c", "set -e; source "+script+"; complete -p actiond").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "actiond") {
		t.Fatalf("bash: %v %s", err, out)
	}
	if zsh, err := exec.LookPath("zsh"); err == nil {
		if out, err := exec.Command(zsh, "-n", "-c", mustActiond(t, "completion", "zsh")).CombinedOutput(); err != nil {
			t.Fatalf("zsh -n: %v %s", err, out)
		}
	}
	commands := mustActiond(t, "__complete", "")
	for _, want := range []string{"serve", "token", "sessions", "executions", "execution", "version", "completion"} {
		if !regexp.MustCompile(`(?m)^` + want + `\t`).MatchString(commands) {
			t.Errorf("commands complete without %s:\n%s", want, commands)
		}
	}
	if out := mustActiond(t, "__complete", "token", "--audience", ""); !strings.HasPrefix(out, "mcp\ngraphql\n") {
		t.Errorf("--audience completes %q", out)
	}
}

// token's flags end up in its claims: principal, subject, client, accounts,
// audience and lifetime; a lifetime past the limit is a usage error.
func TestTokenFlags(t *testing.T) {
	p := serve(t, store.SQLite)
	db := at.StoreArgs(p.Store)
	raw := strings.TrimSpace(mustActiond(t, append([]string{"token", "--subject", "ada", "--principal", "ops", "--client", "nightly-job",
		"--account", "111111111111,222222222222", "--ttl", "30m", "--audience", "graphql"}, db...)...))
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q", raw)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	accounts, _ := claims["accounts"].([]any)
	if claims["sub"] != "ada" || claims["principal"] != "ops" || claims["client_id"] != "nightly-job" || claims["iss"] != p.PublicURL ||
		claims["aud"] != p.PublicURL+"/financial/v1/graphql" || len(accounts) != 2 || accounts[1] != "222222222222" ||
		claims["exp"].(float64)-claims["iat"].(float64) != 1800 {
		t.Fatalf("claims %v", claims)
	}
	if r := actiond(t, append([]string{"token", "--subject", "ada", "--ttl", "200h"}, db...)...); r.code != 2 || !strings.Contains(r.stderr, "200h0m0s is outside") {
		t.Fatalf("--ttl 200h: %d %s", r.code, r.stderr)
	}
}
