package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/coded"
)

func writeAccounts(t *testing.T, home, content string, mode os.FileMode) string {
	t.Helper()
	path := AccountsPath(home)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

const someAccounts = `claude:
  work: {api-key: sk-ant-api03-aaaa}
  personal:
    oauth-token: sk-ant-oat01-bbbb
openai:
  default: {api-key: sk-proj-cccc}
github:
  bot: {token: ghp_dddd}
`

func TestLoadAccounts(t *testing.T) {
	home := t.TempDir()
	a, err := LoadAccounts(home)
	if err != nil || a.Exists || a.Count() != 0 {
		t.Fatalf("no file: %+v, %v", a, err)
	}
	writeAccounts(t, home, someAccounts, 0o600)
	a, err = LoadAccounts(home)
	if err != nil {
		t.Fatal(err)
	}
	if a.Count() != 4 || a.Stamp == "" {
		t.Errorf("%d accounts, stamp %q", a.Count(), a.Stamp)
	}
	for _, c := range []struct{ kind, name, secret string }{
		{"claude", "work", "sk-ant-api03-aaaa"}, {"claude", "personal", "sk-ant-oat01-bbbb"},
		{"openai", "default", "sk-proj-cccc"}, {"github", "bot", "ghp_dddd"},
	} {
		account, ok := a.Get(c.kind, c.name)
		if !ok || account.Secret() != c.secret {
			t.Errorf("%s %s: %v %v", c.kind, c.name, ok, ok)
		}
		if shown := fmt.Sprintf("%v %+v %#v", account, account, account); strings.Contains(shown, c.secret) {
			t.Errorf("printing the account shows its secret: %s", shown)
		}
	}
	if a, _ := a.Get("claude", "work"); a.APIKey == "" || a.OAuthToken != "" {
		t.Errorf("work is an API key: %v", a)
	}
	if _, ok := a.Get("claude", "nobody"); ok {
		t.Error("an account that is not there")
	}
}

// accounts.yaml is refused, naming the file and the fix, when anyone but
// the user may read it, when it is not the user's, or when its directory
// may be written by anyone.
func TestLoadAccountsRefusesLooseModes(t *testing.T) {
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o660} {
		home := t.TempDir()
		path := writeAccounts(t, home, someAccounts, mode)
		_, err := LoadAccounts(home)
		if coded.CodeOf(err) != CodeInsecure || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("mode %04o: %v", mode, err)
		}
	}
	home := t.TempDir()
	path := writeAccounts(t, home, someAccounts, 0o600)
	if os.Getuid() == 0 {
		// Root can give the file to someone else, as a mistaken copy would.
		if err := os.Chown(path, 4242, 4242); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadAccounts(home); coded.CodeOf(err) != CodeInsecure || !strings.Contains(err.Error(), "uid 4242") {
			t.Errorf("a file of another user: %v", err)
		}
		if err := os.Chown(path, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(Dir(home), 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadAccounts(home); coded.CodeOf(err) != CodeInsecure || !strings.Contains(err.Error(), Dir(home)) {
		t.Errorf("a directory anyone may write: %v", err)
	}
}

// A bad entry names the line and key, and never the credential.
func TestLoadAccountsBadEntries(t *testing.T) {
	cases := []struct{ content, want string }{
		{"gitlab:\n  me: {token: glpat-SECRET1}\n", `unknown key "gitlab"`},
		{"claude:\n  Work Account: {api-key: SECRET2}\n", "not an account name"},
		{"claude:\n  w: {api-key: SECRET3, oauth-token: SECRET3b}\n", "exactly one of"},
		{"claude:\n  w: {token: SECRET4}\n", `unknown key "token"`},
		{"openai:\n  w: {api-key: \"SECRET5 with spaces\"}\n", "not a credential"},
		{"github:\n  w: {token: [SECRET6]}\n", "credential as text"},
		{"github:\n  w: {}\n", "exactly one of"},
	}
	for _, c := range cases {
		home := t.TempDir()
		writeAccounts(t, home, c.content, 0o600)
		_, err := LoadAccounts(home)
		if coded.CodeOf(err) != CodeInvalid || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "accounts.yaml:") {
			t.Errorf("%q: %v", c.content, err)
		}
		if err != nil && strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%q: the message shows the credential: %v", c.content, err)
		}
	}
}

func TestLoadProxyUpstreams(t *testing.T) {
	home := t.TempDir()
	writeConfig(t, home, "proxy:\n  upstreams:\n    API.Anthropic.com: http://127.0.0.1:9001\n    registry.example:8443: https://mirror.example/npm/\n")
	c := mustLoad(t, home)
	a := c.Upstreams["api.anthropic.com"]
	m := c.Upstreams["registry.example:8443"]
	if a.URL.String() != "http://127.0.0.1:9001" || m.URL.Host != "mirror.example:443" || m.URL.Path != "/npm" || len(c.Upstreams) != 2 {
		t.Errorf("upstreams %+v", c.Upstreams)
	}
	// isx init rewriting config.yaml keeps the section.
	c.Project = "elsewhere"
	if err := Save(home, c); err != nil {
		t.Fatal(err)
	}
	if c := mustLoad(t, home); c.Project != "elsewhere" || len(c.Upstreams) != 2 {
		t.Errorf("after Save: project %q, upstreams %v", c.Project, c.Upstreams)
	}
	for _, bad := range []struct{ yaml, want string }{
		{"proxy:\n  upstream: {}\n", `unknown key "upstream"`},
		{"proxy:\n  upstreams:\n    api.anthropic.com: ftp://x\n", "http:// or https://"},
		{"proxy:\n  upstreams:\n    api.anthropic.com: http://u:p@x\n", "without a user"},
		{"proxy:\n  upstreams:\n    'bad host!': http://x\n", "not a host name"},
		{"proxy:\n  upstreams:\n    api.anthropic.com:\n", "has no value"},
	} {
		writeConfig(t, home, bad.yaml)
		if _, err := Load(home); coded.CodeOf(err) != CodeInvalid || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v", bad.yaml, err)
		}
	}
}

// The directory of accounts.yaml is checked as the route secrets' are:
// writable by a group others share, it is refused, naming it; writable
// by the user's own private group (a umask of 002), it is not.
func TestLoadAccountsDirectoryGroup(t *testing.T) {
	home := t.TempDir()
	writeAccounts(t, home, someAccounts, 0o600)
	dir := Dir(home)
	if err := os.Chmod(dir, 0o770); err != nil {
		t.Fatal(err)
	}
	const nogroup = 65534 // a group that is not the user's own
	if err := os.Chown(dir, os.Getuid(), nogroup); err != nil {
		t.Skipf("cannot give %s to another group here: %v", dir, err)
	}
	_, err := LoadAccounts(home)
	if coded.CodeOf(err) != CodeInsecure || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "chmod g-w") {
		t.Errorf("a directory a shared group may write: %v", err)
	}
	if err := os.Chown(dir, os.Getuid(), os.Getgid()); err != nil {
		t.Fatal(err)
	}
	owner := CurrentOwner()
	if !owner.PrivateGroup(owner.GID) {
		t.Fatalf("group %d is not private here; the test needs the user's own group", owner.GID)
	}
	if a, err := LoadAccounts(home); err != nil || a.Count() != 4 {
		t.Errorf("a directory the user's private group may write: %v, %v", a, err)
	}
}

// accounts.yaml is opened once and the open file checked: while it is
// replaced, again and again, by turns with a private file and one anyone
// may read, every load either refuses or returns the private file's
// accounts, never the other's.
func TestLoadAccountsReadsTheFileItChecked(t *testing.T) {
	home := t.TempDir()
	path := writeAccounts(t, home, "claude:\n  work: {api-key: sk-private}\n", 0o600)
	dir := filepath.Dir(path)
	private, open := filepath.Join(dir, "private.yaml"), filepath.Join(dir, "open.yaml")
	if err := os.Link(path, private); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(open, []byte("claude:\n  work: {api-key: sk-anyone-may-read}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	swapped := make(chan int)
	go func() {
		n := 0
		defer func() { swapped <- n }()
		for {
			for _, from := range []string{private, open} {
				select {
				case <-stop:
					return
				default:
				}
				tmp := filepath.Join(dir, ".swap")
				os.Remove(tmp)
				if err := os.Link(from, tmp); err != nil {
					t.Error(err)
					return
				}
				if err := os.Rename(tmp, path); err != nil {
					t.Error(err)
					return
				}
				n++
			}
		}
	}()
	loaded, refused := 0, 0
	for range 20000 {
		a, err := LoadAccounts(home)
		if err != nil {
			if coded.CodeOf(err) != CodeInsecure {
				t.Fatalf("a load failed otherwise: %v", err)
			}
			refused++
			continue
		}
		loaded++
		if account, _ := a.Get("claude", "work"); account.APIKey != "sk-private" {
			close(stop)
			<-swapped
			t.Fatalf("after %d loads, one returned the accounts of a file anyone may read (%q)", loaded+refused, account.APIKey)
		}
	}
	close(stop)
	n := <-swapped
	if loaded == 0 || refused == 0 {
		t.Errorf("the loads did not meet both files (%d loaded, %d refused, %d swaps)", loaded, refused, n)
	}
	t.Logf("%d loads of the private file, %d refusals, %d swaps", loaded, refused, n)
}
