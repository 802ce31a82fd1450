package config

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"time"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/incusspawn/isx/internal/isx/template"
	"github.com/incusspawn/isx/internal/isx/yamltree"
)

// CodeInsecure: accounts.yaml (or its directory) can be read or changed
// by someone other than the user, so the host proxy does not use it.
const CodeInsecure = "config_insecure"

// Accounts is accounts.yaml: the credentials the host proxy injects into
// the requests of instances, by kind (template.AccountClaude, …) and name.
// A template names, per kind, the account its instances use:
//
//	claude:
//	  work: {api-key: sk-ant-…}        # or oauth-token: …
//	openai:
//	  personal: {api-key: sk-…}
//	github:
//	  bot: {token: ghp_…}
//
// The file must be the user's and readable by the user alone; nothing of
// it ever enters an instance.
type Accounts struct {
	Path   string
	Exists bool
	// Stamp changes whenever the file is rewritten, so a reader can tell
	// whether to read it again.
	Stamp    string
	accounts map[string]map[string]Account
}

// Account is one credential. Its String never shows the secret.
type Account struct {
	Kind string // template.AccountClaude, AccountOpenAI or AccountGitHub
	Name string
	// Exactly one of these is set: an API key (claude, openai), an OAuth
	// token (claude) or a token (github).
	APIKey, OAuthToken, Token string
}

// Secret is the credential, whichever form it has.
func (a Account) Secret() string { return a.APIKey + a.OAuthToken + a.Token }

func (a Account) String() string   { return fmt.Sprintf("%s account %s", a.Kind, a.Name) }
func (a Account) GoString() string { return a.String() }

var (
	accountNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,39}$`)
	credentialKeys     = map[string][]string{
		template.AccountClaude: {"api-key", "oauth-token"},
		template.AccountOpenAI: {"api-key"},
		template.AccountGitHub: {"token"},
	}
)

// Get returns the account of that kind and name.
func (a *Accounts) Get(kind, name string) (Account, bool) {
	account, ok := a.accounts[kind][name]
	return account, ok
}

// Count is how many accounts the file holds.
func (a *Accounts) Count() int {
	n := 0
	for _, byName := range a.accounts {
		n += len(byName)
	}
	return n
}

// LoadAccounts reads accounts.yaml. A missing file holds no accounts. A
// file anyone but the user could read or replace is refused (CodeInsecure),
// naming the file and the chmod or chown that fixes it; so is a bad entry
// (CodeInvalid), naming line and key but never a secret. The file is
// opened once and the open file checked, so what was checked is what is
// read; its directory is checked as the route secrets' are (Owner).
func LoadAccounts(home string) (*Accounts, error) {
	path := AccountsPath(home)
	owner := CurrentOwner()
	data, info, err := owner.ReadPrivate(path, true, maxFileSize)
	if errors.Is(err, fs.ErrNotExist) {
		return &Accounts{Path: path}, nil
	}
	if err != nil {
		return nil, accountsProblem(path, err)
	}
	if err := owner.SafeDir(Dir(home)); err != nil {
		return nil, accountsProblem(Dir(home), err)
	}
	a, err := parseAccounts(data, path)
	if err != nil {
		return nil, err
	}
	a.Stamp = AccountsStamp(info)
	return a, nil
}

// AccountsStamp identifies one version of the file from its metadata.
func AccountsStamp(info fs.FileInfo) string {
	return fmt.Sprintf("%d:%s:%o", info.Size(), info.ModTime().UTC().Format(time.RFC3339Nano), info.Mode())
}

func insecure(path, format string, args ...any) *Error {
	return &Error{yamltree.Problem(CodeInsecure, yamltree.Place{File: path}, nil, format, args...)}
}

// accountsProblem is an error of reading accounts.yaml or looking at its
// directory, coded for the one who reads it.
func accountsProblem(path string, err error) error {
	var unsafe *UnsafeError
	if errors.As(err, &unsafe) {
		return insecure(unsafe.Path, "%s", unsafe.Why())
	}
	return unusable(path, "cannot be read", err)
}

func parseAccounts(data []byte, path string) (*Accounts, error) {
	a := &Accounts{Path: path, Exists: true, accounts: map[string]map[string]Account{}}
	r := newReader(filepath.Clean(path))
	_, root, err := r.Document(data)
	if err != nil || root == nil {
		return a, err
	}
	err = r.Mapping(root, "", template.AccountKinds, func(kind string, _, v *yaml.Node) error {
		a.accounts[kind] = map[string]Account{}
		return r.Mapping(v, kind, nil, func(name string, k, v *yaml.Node) error {
			field := yamltree.Join(kind, name)
			if !accountNamePattern.MatchString(name) {
				return invalidf(r.File, k.Line, field, "%q is not an account name (lowercase letters, digits, '.', '_' and '-', at most 40)", name)
			}
			account, err := r.account(kind, name, v, field)
			a.accounts[kind][name] = account
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

func (r *nodeReader) account(kind, name string, n *yaml.Node, field string) (Account, error) {
	account := Account{Kind: kind, Name: name}
	keys := credentialKeys[kind]
	set := 0
	err := r.Mapping(n, field, keys, func(key string, _, v *yaml.Node) error {
		secret, err := r.secret(v, yamltree.Join(field, key))
		switch key {
		case "api-key":
			account.APIKey = secret
		case "oauth-token":
			account.OAuthToken = secret
		case "token":
			account.Token = secret
		}
		set++
		return err
	})
	if err != nil {
		return account, err
	}
	if set != 1 {
		return account, invalidf(r.File, n.Line, field, "must have exactly one of %s", strings.Join(keys, ", "))
	}
	return account, nil
}

// secret reads a credential. Its value never appears in a message.
func (r *nodeReader) secret(n *yaml.Node, key string) (string, error) {
	if n.Kind != yaml.ScalarNode || yamltree.IsNull(n) {
		return "", invalidf(r.File, n.Line, key, "must be the credential as text")
	}
	s := n.Value
	if s == "" || len(s) > 4096 || strings.IndexFunc(s, func(c rune) bool { return unicode.IsSpace(c) || unicode.IsControl(c) }) >= 0 {
		return "", invalidf(r.File, n.Line, key, "is not a credential: it is empty, longer than 4096 characters, or holds spaces or control characters")
	}
	return s, nil
}
