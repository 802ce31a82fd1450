package starlark

import (
	"container/list"
	"crypto/sha256"
	"sync"

	"go.starlark.net/resolve"
	star "go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// fileOptions is the dialect: standard Starlark plus set(). No while and no
// recursion, so a script's stack stays shallow and every loop is over
// something finite; the step limit bounds the rest.
var fileOptions = &syntax.FileOptions{Set: true}

// compiled is a script compiled once and run many times, each run with a
// fresh thread and fresh globals.
type compiled struct {
	program  *star.Program
	analysis *Analysis
	// predeclared are the predeclared names the program uses: a run gives
	// it only those.
	predeclared []string
	err         error // a refused script is cached too
}

// cacheSize bounds the cache: programs from external agents are arbitrary,
// so an unbounded cache would grow with every distinct source.
const cacheSize = 512

type cacheKey [sha256.Size]byte

type programCache struct {
	mu      sync.Mutex
	entries map[cacheKey]*list.Element
	order   *list.List // most recently used first; values are *cacheEntry
}

type cacheEntry struct {
	key      cacheKey
	compiled *compiled
}

var cache = &programCache{entries: map[cacheKey]*list.Element{}, order: list.New()}

func keyOf(script Script) cacheKey {
	h := sha256.New()
	h.Write([]byte(script.Name))
	h.Write([]byte{0})
	h.Write([]byte(script.Source))
	var key cacheKey
	h.Sum(key[:0])
	return key
}

func (c *programCache) get(key cacheKey) *compiled {
	c.mu.Lock()
	defer c.mu.Unlock()
	element, ok := c.entries[key]
	if !ok {
		return nil
	}
	c.order.MoveToFront(element)
	return element.Value.(*cacheEntry).compiled
}

func (c *programCache) put(key cacheKey, value *compiled) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if element, ok := c.entries[key]; ok {
		c.order.MoveToFront(element)
		return
	}
	c.entries[key] = c.order.PushFront(&cacheEntry{key: key, compiled: value})
	for c.order.Len() > cacheSize {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.entries, oldest.Value.(*cacheEntry).key)
	}
}

// compile parses, resolves, checks and compiles a script, once per source.
func compile(script Script) (*compiled, error) {
	script = script.named()
	key := keyOf(script)
	if c := cache.get(key); c != nil {
		return c, c.err
	}
	c := build(script)
	cache.put(key, c)
	return c, c.err
}

// build checks and analyses the script as written, then compiles it
// rewritten so that what it allocates is measured (rewrite.go).
func build(script Script) *compiled {
	file, err := fileOptions.Parse(script.Name, script.Source, 0)
	if err != nil {
		return &compiled{err: staticError(err)}
	}
	if _, err := star.FileProgram(file, isPredeclared); err != nil {
		return &compiled{err: staticError(err)}
	}
	if err := checkShape(file); err != nil {
		return &compiled{err: err}
	}
	analysis := analyse(file)
	measured, err := fileOptions.Parse(script.Name, script.Source, 0)
	if err != nil {
		return &compiled{err: staticError(err)}
	}
	rewrite(measured)
	program, err := star.FileProgram(measured, isPredeclared)
	if err != nil {
		return &compiled{err: staticError(err)}
	}
	return &compiled{program: program, analysis: analysis, predeclared: predeclaredNames(measured)}
}

// predeclaredNames are the predeclared names a resolved file uses.
func predeclaredNames(f *syntax.File) []string {
	seen := map[string]bool{}
	var names []string
	syntax.Walk(f, func(n syntax.Node) bool {
		if id, ok := n.(*syntax.Ident); ok {
			if b, ok := id.Binding.(*resolve.Binding); ok && b.Scope == resolve.Predeclared && !seen[id.Name] {
				seen[id.Name] = true
				names = append(names, id.Name)
			}
		}
		return true
	})
	return names
}

// defaultName names a script whose caller gave it no name.
const defaultName = "script.star"

func (s Script) named() Script {
	if s.Name == "" {
		s.Name = defaultName
	}
	return s
}
