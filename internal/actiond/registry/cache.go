package registry

import (
	"context"
	"errors"
	"sync"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/store"
)

// Cached reads the committed registry as Reader does, and keeps what it
// read while the account's generation stays where it was: every read still
// reads the generation, which moves with every write of an action or a
// principal, so that what it answers is always what is committed, while
// the rows themselves, and the definitions decoded from them, are read
// and decoded once per generation. A task's worker reads its agent, its
// tools and its authority again before every step; most of those reads
// find nothing changed.
//
// What it answers is shared: callers must not change the targets and
// policies it returns.
type Cached struct {
	reader *Reader
	store  *store.Store

	mu         sync.Mutex
	actions    map[cacheKey]cachedTarget
	names      map[cacheKey]cachedTarget
	principals map[cacheKey]cachedPrincipal
}

// cacheKey names one read: an action by ID or by name, at a version, or a
// principal by name.
type cacheKey struct {
	account, name string
	version       int
}

type cachedTarget struct {
	generation int64
	target     action.Target
	err        error
}

type cachedPrincipal struct {
	generation int64
	policies   []policy.Policy
	found      bool
}

// cacheSize bounds each of the cache's maps; a full one starts over.
const cacheSize = 4096

// NewCached reads committed rows of s, keeping them per generation.
func NewCached(s *store.Store) *Cached {
	return &Cached{reader: NewReader(s), store: s, actions: map[cacheKey]cachedTarget{}, names: map[cacheKey]cachedTarget{}, principals: map[cacheKey]cachedPrincipal{}}
}

// Resolver resolves names as they stand committed now.
func (c *Cached) Resolver(account string) action.Resolver {
	return cachedResolver{c: c, account: account}
}

type cachedResolver struct {
	c       *Cached
	account string
}

func (r cachedResolver) Resolve(ctx context.Context, name string, version int) (action.Target, error) {
	return r.c.target(ctx, r.c.names, cacheKey{r.account, name, version}, func() (action.Target, error) {
		return r.c.reader.Resolver(r.account).Resolve(ctx, name, version)
	})
}

// Action reads an action at version (0: its latest) as a target; a missing
// one wraps action.ErrNotFound.
func (c *Cached) Action(ctx context.Context, account, id string, version int) (action.Target, error) {
	return c.target(ctx, c.actions, cacheKey{account, id, version}, func() (action.Target, error) {
		return c.reader.Action(ctx, account, id, version)
	})
}

func (c *Cached) target(ctx context.Context, m map[cacheKey]cachedTarget, key cacheKey, read func() (action.Target, error)) (action.Target, error) {
	generation, err := c.store.Generation(ctx, key.account)
	if err != nil {
		return action.Target{}, err
	}
	c.mu.Lock()
	cached, ok := m[key]
	c.mu.Unlock()
	if ok && cached.generation == generation {
		return cached.target, cached.err
	}
	target, err := read()
	if err != nil && !isNotFound(err) {
		return action.Target{}, err // the database's failure is not kept
	}
	c.mu.Lock()
	if len(m) >= cacheSize {
		clear(m)
	}
	m[key] = cachedTarget{generation: generation, target: target, err: err}
	c.mu.Unlock()
	return target, err
}

// Principal returns a principal's policies; found is false when it has no
// row (and so no permissions).
func (c *Cached) Principal(ctx context.Context, account, name string) ([]policy.Policy, bool, error) {
	generation, err := c.store.Generation(ctx, account)
	if err != nil {
		return nil, false, err
	}
	key := cacheKey{account: account, name: name}
	c.mu.Lock()
	cached, ok := c.principals[key]
	c.mu.Unlock()
	if ok && cached.generation == generation {
		return cached.policies, cached.found, nil
	}
	policies, found, err := c.reader.Principal(ctx, account, name)
	if err != nil {
		return nil, false, err
	}
	c.mu.Lock()
	if len(c.principals) >= cacheSize {
		clear(c.principals)
	}
	c.principals[key] = cachedPrincipal{generation: generation, policies: policies, found: found}
	c.mu.Unlock()
	return policies, found, nil
}

// isNotFound says an action read found nothing: an answer that holds until
// the generation moves, like any other.
func isNotFound(err error) bool { return errors.Is(err, action.ErrNotFound) }
