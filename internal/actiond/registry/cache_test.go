package registry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/registry"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
)

// The cache answers what is committed: a read after a write of the action
// or the principal it read, or of a name it found missing, reads again.
func TestCachedReadsWhatIsCommitted(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		ctx := context.Background()
		s := open(t, d)
		cached := registry.NewCached(s)
		if _, err := cached.Resolver(account).Resolve(ctx, "get_account", 0); !errors.Is(err, action.ErrNotFound) {
			t.Fatalf("before it exists: %v", err)
		}
		w := s.NewWork(account)
		try(registry.CreateAction(ctx, w, toolID, tool("get_account"), now)).must(t)
		commit(t, s, w)
		if got := try(cached.Resolver(account).Resolve(ctx, "get_account", 0)).must(t); got.Version != 1 {
			t.Fatalf("resolved version %d after the create, want 1", got.Version)
		}
		if got := try(cached.Action(ctx, account, toolID, 0)).must(t); got.Definition.Name != "get_account" {
			t.Fatalf("read %q", got.Definition.Name)
		}
		w = s.NewWork(account)
		renamed := tool("get_account")
		renamed.Description = "Changed."
		try(registry.UpdateAction(ctx, w, toolID, renamed, now.Add(time.Hour))).must(t)
		commit(t, s, w)
		if got := try(cached.Action(ctx, account, toolID, 0)).must(t); got.Version != 2 || got.Definition.Description != "Changed." {
			t.Fatalf("after the update read version %d, %q", got.Version, got.Definition.Description)
		}
		if got := try(cached.Resolver(account).Resolve(ctx, "get_account", 0)).must(t); got.Version != 2 {
			t.Fatalf("resolved version %d after the update, want 2", got.Version)
		}
		if _, found, err := cached.Principal(ctx, account, "ops"); err != nil || found {
			t.Fatalf("a principal before it exists: %v %v", found, err)
		}
		w = s.NewWork(account)
		try(registry.PutPrincipal(ctx, w, "ops", []policy.Policy{{Effect: policy.Allow, Actions: []string{"SELECT"}, Resources: []string{"*"}}})).must(t)
		commit(t, s, w)
		policies, found, err := cached.Principal(ctx, account, "ops")
		if err != nil || !found || len(policies) != 1 {
			t.Fatalf("after the put: %v %v %v", policies, found, err)
		}
	})
}
