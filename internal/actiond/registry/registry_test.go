package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/registry"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
	"github.com/incusspawn/isx/internal/clock"
)

const account = "000000000000"

var now = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

const (
	toolID   = "0b6a4c4e-2f7e-4c55-9d43-6a3f4e2b8d10"
	otherID  = "7d2a9e04-5b1c-4f3e-8a6d-0c9b2e7f4a18"
	serverID = "3c1e4d1a-7a1b-4bde-9b7e-6b8f3f0c5a21"
)

func open(t *testing.T, d store.Dialect) *store.Store {
	t.Helper()
	return storetest.Open(t, d, clock.NewFake(now))
}

func tool(name string) action.Definition {
	return action.Definition{
		Name: name, Kind: action.KindTool,
		Config: map[string]any{"source": "def run(event):\n    return event[\"data\"]\n"},
		Tool:   &action.ToolBlock{InputSchema: map[string]any{"type": "object"}},
	}
}

// commit applies a work in its own transaction.
func commit(t *testing.T, s *store.Store, w *store.Work) {
	t.Helper()
	if err := s.Write(context.Background(), func(tx *store.Tx) error { return tx.Apply(context.Background(), w) }); err != nil {
		t.Fatalf("apply: %v", err)
	}
}

// outcome carries a call's two results to must, which fails the test on an
// error: try(f()).must(t).
type outcome[T any] struct {
	value T
	err   error
}

func try[T any](value T, err error) outcome[T] { return outcome[T]{value, err} }

func (o outcome[T]) must(t *testing.T) T {
	t.Helper()
	if o.err != nil {
		t.Fatal(o.err)
	}
	return o.value
}

func wantCode(t *testing.T, err error, code, field string) {
	t.Helper()
	var e *registry.Error
	if !errors.As(err, &e) || e.Code != code || e.Field != field {
		t.Fatalf("error %v, want %s on %q", err, code, field)
	}
}

// Versions are append-only rows beside the head; a rename moves the name,
// a delete writes a deleted version and frees the name (the rows the
// platform's records are read from).
func TestActionRows(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		ctx := context.Background()
		s := open(t, d)
		w := s.NewWork(account)
		v1 := try(registry.CreateAction(ctx, w, toolID, tool("get_account"), now)).must(t)
		if v1.Version != 1 || !v1.Created.Equal(now) || !v1.Modified.Equal(now) {
			t.Fatalf("v1 %+v", v1)
		}
		renamed := tool("get_account_v2")
		v2 := try(registry.UpdateAction(ctx, w, toolID, renamed, now.Add(time.Hour))).must(t)
		if v2.Version != 2 || !v2.Created.Equal(now) || !v2.Modified.Equal(now.Add(time.Hour)) {
			t.Fatalf("v2 %+v", v2)
		}
		commit(t, s, w)

		w = s.NewWork(account)
		keys := map[string]bool{}
		for _, table := range []string{registry.TableAction, registry.TableActionName} {
			rows := try(w.Scan(ctx, table, "", "", 0)).must(t)
			for _, row := range rows {
				keys[table+" "+row.Key] = true
			}
		}
		for _, key := range []string{"Action " + toolID, "Action " + toolID + "@0000000001", "Action " + toolID + "@0000000002", "ActionName get_account_v2"} {
			if !keys[key] {
				t.Errorf("missing row %s in %v", key, keys)
			}
		}
		if keys["ActionName get_account"] {
			t.Errorf("the old name still points at the action")
		}
		if _, err := registry.ActionByName(ctx, w, "get_account"); !errors.Is(err, registry.ErrNotFound) {
			t.Fatalf("old name: %v", err)
		}
		history := try(registry.History(ctx, w, toolID)).must(t)
		if len(history) != 2 || history[0].Definition.Name != "get_account" || history[1].Definition.Name != "get_account_v2" {
			t.Fatalf("history %+v", history)
		}

		deleted := try(registry.DeleteAction(ctx, w, toolID, now.Add(2*time.Hour))).must(t)
		if deleted.Version != 3 || !deleted.Deleted {
			t.Fatalf("deleted %+v", deleted)
		}
		if _, err := registry.UpdateAction(ctx, w, toolID, renamed, now); !errors.Is(err, registry.ErrNotFound) {
			t.Fatalf("update of a deleted action: %v", err)
		}
		if _, err := registry.DeleteAction(ctx, w, toolID, now); !errors.Is(err, registry.ErrNotFound) {
			t.Fatalf("delete of a deleted action: %v", err)
		}
		// The name is free again, the ID is not.
		try(registry.CreateAction(ctx, w, otherID, tool("get_account_v2"), now)).must(t)
		_, err := registry.CreateAction(ctx, w, toolID, tool("fresh"), now)
		wantCode(t, err, registry.CodeAlreadyExists, "id")
		head := try(registry.Action(ctx, w, toolID, 0)).must(t)
		if !head.Deleted || head.Version != 3 {
			t.Fatalf("head after delete %+v", head)
		}
		list := try(registry.Actions(ctx, w, "", 0)).must(t)
		if len(list) != 1 || list[0].ID != otherID {
			t.Fatalf("list %+v", list)
		}
	})
}

func TestActionRefusals(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		ctx := context.Background()
		w := open(t, d).NewWork(account)
		try(registry.CreateAction(ctx, w, toolID, tool("a"), now)).must(t)
		_, err := registry.CreateAction(ctx, w, otherID, tool("a"), now)
		wantCode(t, err, registry.CodeAlreadyExists, "name")
		try(registry.CreateAction(ctx, w, otherID, tool("b"), now)).must(t)
		_, err = registry.UpdateAction(ctx, w, otherID, tool("a"), now)
		wantCode(t, err, registry.CodeAlreadyExists, "name")
		server := action.Definition{Name: "b", Kind: action.KindMCP}
		_, err = registry.UpdateAction(ctx, w, otherID, server, now)
		wantCode(t, err, registry.CodeBadRequest, "kind")
		_, err = registry.UpdateAction(ctx, w, serverID, tool("c"), now)
		wantCode(t, err, registry.CodeNotFound, "id")
		for _, id := range []string{"", "x", "3C1E4D1A-7A1B-4BDE-9B7E-6B8F3F0C5A21", "{3c1e4d1a-7a1b-4bde-9b7e-6b8f3f0c5a21}",
			"3c1e4d1a7a1b4bde9b7e6b8f3f0c5a21", toolID + "@0000000001"} {
			_, err = registry.CreateAction(ctx, w, id, tool("z"), now)
			wantCode(t, err, registry.CodeBadRequest, "id")
			_, err = registry.Action(ctx, w, id, 0)
			wantCode(t, err, registry.CodeBadRequest, "id")
		}
	})
}

// ACT-036, ACT-037: the resolver reads the latest version of a name, or the
// pinned one; a later version is seen by the next resolution, and by the
// same unit of work before it is applied. Enabled and Deleted are reported.
func TestResolver_ACT036_ACT037(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		ctx := context.Background()
		s := open(t, d)
		w := s.NewWork(account)
		try(registry.CreateAction(ctx, w, toolID, tool("get_account"), now)).must(t)
		commit(t, s, w)

		w = s.NewWork(account)
		r := registry.NewResolver(w)
		target := try(r.Resolve(ctx, "get_account", 0)).must(t)
		if target.ID != toolID || target.Version != 1 || !target.Enabled || target.Deleted {
			t.Fatalf("latest %+v", target)
		}
		v2 := tool("get_account")
		v2.Description = "second"
		try(registry.UpdateAction(ctx, w, toolID, v2, now)).must(t)
		if target := try(r.Resolve(ctx, "get_account", 0)).must(t); target.Version != 2 || target.Definition.Description != "second" {
			t.Fatalf("the work's own write is not resolved: %+v", target)
		}
		if target := try(r.Resolve(ctx, "get_account", 1)).must(t); target.Version != 1 || target.Definition.Description != "" {
			t.Fatalf("pinned %+v", target)
		}
		// Committed state does not see the work yet.
		committed := registry.NewReader(s).Resolver(account)
		if target := try(committed.Resolve(ctx, "get_account", 0)).must(t); target.Version != 1 {
			t.Fatalf("committed resolver sees an unapplied write: %+v", target)
		}
		for _, miss := range []struct {
			name    string
			version int
		}{{"nope", 0}, {"get_account", 3}} {
			if _, err := r.Resolve(ctx, miss.name, miss.version); !errors.Is(err, action.ErrNotFound) {
				t.Fatalf("%s@%d: %v", miss.name, miss.version, err)
			}
		}
		// Disabling the action disables its pinned versions too.
		disabled := tool("get_account")
		off := false
		disabled.Enabled = &off
		try(registry.UpdateAction(ctx, w, toolID, disabled, now)).must(t)
		if target := try(r.Resolve(ctx, "get_account", 1)).must(t); target.Enabled || target.Deleted {
			t.Fatalf("pinned version of a disabled action %+v", target)
		}
		try(registry.DeleteAction(ctx, w, toolID, now)).must(t)
		if _, err := r.Resolve(ctx, "get_account", 1); !errors.Is(err, action.ErrNotFound) {
			t.Fatalf("a deleted action resolves: %v", err)
		}
	})
}

// Two requests that read the same head and both write a version: the second
// to apply conflicts instead of overwriting the first.
func TestConcurrentUpdatesConflict(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		ctx := context.Background()
		s := open(t, d)
		w := s.NewWork(account)
		try(registry.CreateAction(ctx, w, toolID, tool("a"), now)).must(t)
		commit(t, s, w)
		first, second := s.NewWork(account), s.NewWork(account)
		try(registry.UpdateAction(ctx, first, toolID, tool("a"), now)).must(t)
		try(registry.UpdateAction(ctx, second, toolID, tool("a"), now)).must(t)
		commit(t, s, first)
		err := s.Write(ctx, func(tx *store.Tx) error { return tx.Apply(ctx, second) })
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("second apply: %v", err)
		}
		if head := try(registry.Action(ctx, s.NewWork(account), toolID, 0)).must(t); head.Version != 2 {
			t.Fatalf("head %+v", head)
		}
	})
}

func TestKV(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		ctx := context.Background()
		w := open(t, d).NewWork(account)
		for _, key := range []string{"b", "a/with/slashes", "ü", "c"} {
			try(registry.PutKV(ctx, w, "alerts", key, json.RawMessage(`{"k":"`+key+`"}`))).must(t)
		}
		try(registry.PutKV(ctx, w, "alerts.archive", "a", json.RawMessage(`1`))).must(t)
		list := try(registry.ListKV(ctx, w, "alerts", "", 0)).must(t)
		var keys []string
		for _, kv := range list {
			keys = append(keys, kv.Key)
		}
		if strings.Join(keys, ",") != "a/with/slashes,b,c,ü" {
			t.Fatalf("keys %q", keys)
		}
		page := try(registry.ListKV(ctx, w, "alerts", "b", 1)).must(t)
		if len(page) != 1 || page[0].Key != "c" {
			t.Fatalf("page after b: %+v", page)
		}
		got := try(registry.GetKV(ctx, w, "alerts", "a/with/slashes")).must(t)
		if string(got.Value) != `{"k":"a/with/slashes"}` {
			t.Fatalf("value %s", got.Value)
		}
		try(registry.DeleteKV(ctx, w, "alerts", "b")).must(t)
		if _, err := registry.GetKV(ctx, w, "alerts", "b"); !errors.Is(err, registry.ErrNotFound) {
			t.Fatalf("deleted: %v", err)
		}
		if _, err := registry.DeleteKV(ctx, w, "alerts", "b"); !errors.Is(err, registry.ErrNotFound) {
			t.Fatalf("delete twice: %v", err)
		}
	})
}

// Namespaces and keys that could not be stored unambiguously are refused.
func TestKVRefusals(t *testing.T) {
	for _, namespace := range []string{"", "a/b", "a b", "ü", strings.Repeat("n", 129)} {
		wantCode(t, registry.CheckKVNamespace(namespace), registry.CodeBadRequest, "namespace")
	}
	for _, namespace := range []string{"a", "A-b_c.d", strings.Repeat("n", 128)} {
		if err := registry.CheckKVNamespace(namespace); err != nil {
			t.Fatalf("%q: %v", namespace, err)
		}
	}
	for _, key := range []string{"", "a\x00b", "\xff", strings.Repeat("k", 1025)} {
		wantCode(t, registry.CheckKVKey(key), registry.CodeBadRequest, "key")
	}
	for _, key := range []string{"a", "a/b c", strings.Repeat("k", 1024)} {
		if err := registry.CheckKVKey(key); err != nil {
			t.Fatalf("%q: %v", key, err)
		}
	}
}

func TestPrincipals(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		ctx := context.Background()
		s := open(t, d)
		w := s.NewWork(account)
		policies := []policy.Policy{{Effect: policy.Allow, Actions: []string{"SELECT"}, Resources: []string{"financial.*"}}}
		p := try(registry.PutPrincipal(ctx, w, "ops", policies)).must(t)
		if p.Version != 1 {
			t.Fatalf("%+v", p)
		}
		p = try(registry.PutPrincipal(ctx, w, "ops", append(policies, policy.Policy{Effect: policy.Deny, Actions: []string{"*"}, Resources: []string{"auth.*"}}))).must(t)
		if p.Version != 2 || len(p.Policies) != 2 {
			t.Fatalf("%+v", p)
		}
		_, err := registry.PutPrincipal(ctx, w, "bad", []policy.Policy{{Effect: "MAYBE", Actions: []string{"*"}, Resources: []string{"*"}}})
		wantCode(t, err, registry.CodeBadRequest, "policies[0].effect")
		_, err = registry.PutPrincipal(ctx, w, " padded", nil)
		wantCode(t, err, registry.CodeBadRequest, "name")
		commit(t, s, w)

		layer := try(registry.PrincipalLayer(ctx, s.NewWork(account), "ops")).must(t)
		if layer.Name != policy.LayerPrincipal || layer.PrincipalID != "ops" || len(layer.Policies) != 2 {
			t.Fatalf("layer %+v", layer)
		}
		// No row: no policies, so the layer denies everything.
		layer = try(registry.PrincipalLayer(ctx, s.NewWork(account), "nobody")).must(t)
		if err := policy.Check(ctx, policy.Request{Operation: "SELECT", Resource: "financial.KVValue"}, layer); err == nil {
			t.Fatal("a principal without a row may read")
		}
		reader := registry.NewReader(s)
		if got, found, err := reader.Principal(ctx, account, "ops"); err != nil || !found || len(got) != 2 {
			t.Fatalf("reader: %v %v %v", got, found, err)
		}
		if _, found, err := reader.Principal(ctx, "111111111111", "ops"); err != nil || found {
			t.Fatalf("another account's principal: %v %v", found, err)
		}
		try(registry.DeletePrincipal(ctx, w, "ops")).must(t)
		if _, err := registry.Principal(ctx, w, "ops"); !errors.Is(err, registry.ErrNotFound) {
			t.Fatalf("deleted principal: %v", err)
		}
	})
}

func TestResource(t *testing.T) {
	for table, want := range map[string]string{
		"KVValue": "financial.KVValue", "Action": "actions.Action", "ActionName": "actions.ActionName",
		"Principal": "auth.Principal", "Account": "financial.Account",
	} {
		if got := registry.Resource(table); got != want {
			t.Errorf("%s: %s, want %s", table, got, want)
		}
	}
}
