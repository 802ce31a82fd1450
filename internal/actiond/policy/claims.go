package policy

import (
	"sync"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
)

// ClaimsRead names the claims the policies' assertions read, as
// context.auth.claims.<name> or context.auth.claims["<name>"]. all is set
// when an assertion reads the claims some other way (the whole map, a
// computed key, a macro over them), or cannot be parsed: then every claim
// may matter.
func ClaimsRead(policies ...[]Policy) (names map[string]bool, all bool) {
	names = map[string]bool{}
	for _, list := range policies {
		for _, p := range list {
			for _, src := range p.Assertions {
				read := claimsOf(src)
				if read.all {
					return names, true
				}
				for _, name := range read.names {
					names[name] = true
				}
			}
		}
	}
	return names, false
}

type claimsReading struct {
	names []string
	all   bool
}

// The readings are cached per assertion text, as compiled assertions are.
var (
	claimsMu    sync.Mutex
	claimsCache = map[string]claimsReading{}
	parseEnv    = sync.OnceValues(func() (*cel.Env, error) { return cel.NewEnv() })
)

func claimsOf(src string) claimsReading {
	claimsMu.Lock()
	read, ok := claimsCache[src]
	claimsMu.Unlock()
	if ok {
		return read
	}
	read = parseClaims(src)
	claimsMu.Lock()
	if len(claimsCache) >= maxCachedAssertions {
		clear(claimsCache)
	}
	claimsCache[src] = read
	claimsMu.Unlock()
	return read
}

func parseClaims(src string) claimsReading {
	env, err := parseEnv()
	if err != nil {
		return claimsReading{all: true}
	}
	parsed, issues := env.Parse(src)
	if issues.Err() != nil {
		return claimsReading{all: true}
	}
	var read claimsReading
	root := celast.NavigateAST(parsed.NativeRep())
	for _, ident := range celast.MatchDescendants(root, celast.KindMatcher(celast.IdentKind)) {
		if ident.AsIdent() != "context" {
			continue
		}
		auth, name, ok := member(ident)
		if !ok {
			read.all = true // context itself, read whole
			return read
		}
		if name != "auth" {
			continue // context.document
		}
		claims, name, ok := member(auth)
		if !ok || name != "claims" {
			read.all = true
			return read
		}
		if _, name, ok = member(claims); !ok {
			read.all = true
			return read
		}
		read.names = append(read.names, name)
	}
	return read
}

// member is the expression that reads a constant member of e (e.name, or
// e["name"]) and that name; ok is false when e is read another way.
func member(e celast.NavigableExpr) (celast.NavigableExpr, string, bool) {
	parent, ok := e.Parent()
	if !ok {
		return nil, "", false
	}
	switch parent.Kind() {
	case celast.SelectKind:
		return parent, parent.AsSelect().FieldName(), true
	case celast.CallKind:
		call := parent.AsCall()
		if call.FunctionName() != operators.Index || len(call.Args()) != 2 || call.Args()[0].ID() != e.ID() {
			return nil, "", false
		}
		key := call.Args()[1]
		if key.Kind() != celast.LiteralKind {
			return nil, "", false
		}
		if s, ok := key.AsLiteral().(types.String); ok {
			return parent, string(s), true
		}
	}
	return nil, "", false
}
