package policy_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/actiond/policy"
)

func TestMatch(t *testing.T) {
	cases := []struct {
		pattern, name string
		want          bool
	}{
		{"*", "financial.KVValue", true},
		{"*", "", true},
		{"financial.*", "financial.KVValue", true},
		{"financial.*", "financial.", true},
		{"financial.*", "financialX", false},
		{"financial.*", "actions.Action", false},
		{"financial.*", "xfinancial.KVValue", false}, // whole-string match
		{"SELECT", "SELECT", true},
		{"SELECT", "SELECTED", false},
		{"SELECT", "select", false},
		{"SEL?CT", "SELECT", true},
		{"SEL?CT", "SELCT", false},
		{"?", "", false},
		{"*.Action", "actions.Action", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"a**", "a", true},
		{"actions:*", "actions:INVOKE", true},
		{"actions:*", "INVOKE", false},
		{"*Value", "financial.KVValue", true},
	}
	for _, c := range cases {
		if got := policy.Match(c.pattern, c.name); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.pattern, c.name, got, c.want)
		}
	}
}

func allow(actions []string, resources ...string) policy.Policy {
	return policy.Policy{Effect: policy.Allow, Actions: actions, Resources: resources}
}

func deny(actions []string, resources ...string) policy.Policy {
	return policy.Policy{Effect: policy.Deny, Actions: actions, Resources: resources}
}

func TestSingleLayer(t *testing.T) {
	insertKV := policy.Request{Operation: "INSERT", Resource: "financial.KVValue"}
	cases := []struct {
		name     string
		policies []policy.Policy
		req      policy.Request
		allowed  bool
		reason   string
		index    int
	}{
		{"at least one ALLOW is needed", nil, insertKV, false, policy.ReasonNoAllow, -1},
		{"ALLOW on another operation", []policy.Policy{allow([]string{"SELECT"}, "financial.*")}, insertKV, false, policy.ReasonNoAllow, -1},
		{"ALLOW on another resource", []policy.Policy{allow([]string{"INSERT"}, "auth.*")}, insertKV, false, policy.ReasonNoAllow, -1},
		{"ALLOW by wildcard", []policy.Policy{allow([]string{"*"}, "financial.*")}, insertKV, true, "", 0},
		{"ALLOW exact", []policy.Policy{allow([]string{"SELECT", "INSERT"}, "financial.KVValue")}, insertKV, true, "", 0},
		{"DENY wins after ALLOW", []policy.Policy{allow([]string{"*"}, "*"), deny([]string{"INSERT"}, "financial.*")}, insertKV, false, policy.ReasonDenyPolicy, 1},
		{"DENY wins before ALLOW", []policy.Policy{deny([]string{"*"}, "financial.KVValue"), allow([]string{"*"}, "*")}, insertKV, false, policy.ReasonDenyPolicy, 0},
		{"DENY elsewhere does not apply", []policy.Policy{allow([]string{"*"}, "*"), deny([]string{"DELETE"}, "*")}, insertKV, true, "", 0},
		{"only DENY", []policy.Policy{deny([]string{"DELETE"}, "*")}, insertKV, false, policy.ReasonNoAllow, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := policy.Check(context.Background(), c.req, policy.Layer{Name: policy.LayerServer, Policies: c.policies})
			if c.allowed {
				if err != nil {
					t.Fatalf("want allowed, got %v", err)
				}
				return
			}
			var denied *policy.Denied
			if !errors.As(err, &denied) {
				t.Fatalf("want *Denied, got %v", err)
			}
			if denied.Reason != c.reason || denied.PolicyIndex != c.index || denied.Layer != policy.LayerServer {
				t.Fatalf("denial %+v, want reason %s index %d", denied, c.reason, c.index)
			}
		})
	}
}

func TestAssertions(t *testing.T) {
	claims := map[string]any{"sub": "alice", "groups": []any{"ops"}}
	document := map[string]any{"owner": "alice", "kind": "tool"}
	req := policy.Request{Operation: "INVOKE", Resource: "actions.Action", Claims: claims, Document: document}
	withAssertions := func(effect policy.Effect, assertions map[string]string) policy.Policy {
		return policy.Policy{Effect: effect, Actions: []string{"INVOKE"}, Resources: []string{"actions.*"}, Assertions: assertions}
	}
	cases := []struct {
		name      string
		policies  []policy.Policy
		allowed   bool
		failures  int
		failureAt string
	}{
		{"true assertion applies", []policy.Policy{withAssertions(policy.Allow, map[string]string{"own": `context.document.owner == context.auth.claims.sub`})}, true, 0, ""},
		{"all assertions must hold", []policy.Policy{withAssertions(policy.Allow, map[string]string{
			"own": `context.document.owner == context.auth.claims.sub`, "ops": `"admins" in context.auth.claims.groups`})}, false, 0, ""},
		{"false assertion skips an ALLOW", []policy.Policy{withAssertions(policy.Allow, map[string]string{"other": `context.document.owner == "bob"`})}, false, 0, ""},
		{"false assertion skips a DENY (not a deny)", []policy.Policy{
			allow([]string{"*"}, "*"),
			withAssertions(policy.Deny, map[string]string{"agents": `context.document.kind == "agent"`})}, true, 0, ""},
		{"true assertion on a DENY denies", []policy.Policy{
			allow([]string{"*"}, "*"),
			withAssertions(policy.Deny, map[string]string{"tools": `context.document.kind == "tool"`})}, false, 0, ""},
		{"erroring assertion: the DENY does not apply, reported", []policy.Policy{
			allow([]string{"*"}, "*"),
			withAssertions(policy.Deny, map[string]string{"missing": `context.document.missing == "x"`})}, true, 1, "missing"},
		{"erroring assertion: the ALLOW does not apply, reported", []policy.Policy{
			withAssertions(policy.Allow, map[string]string{"bad": `context.auth.claims.nothing`})}, false, 1, "bad"},
		{"non-bool result is an error", []policy.Policy{
			withAssertions(policy.Allow, map[string]string{"str": `context.document.owner`})}, false, 1, "str"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			decision := policy.Evaluate(context.Background(), req, policy.Layer{Name: policy.LayerPrincipal, Policies: c.policies})
			if (decision.Denied == nil) != c.allowed {
				t.Fatalf("allowed = %v, want %v (%v)", decision.Denied == nil, c.allowed, decision.Err())
			}
			if len(decision.AssertionErrors) != c.failures {
				t.Fatalf("assertion errors %+v, want %d", decision.AssertionErrors, c.failures)
			}
			if c.failures > 0 {
				failure := decision.AssertionErrors[0]
				if failure.Assertion != c.failureAt || failure.Layer != policy.LayerPrincipal || failure.Message == "" {
					t.Fatalf("failure %+v", failure)
				}
				if decision.Denied != nil && len(decision.Denied.Detail().AssertionErrors) != c.failures {
					t.Fatalf("a denial's detail keeps the assertion errors")
				}
			}
		})
	}
}

// A layer's own claims replace the request's: replay evaluates the original
// principal with the original request's claims.
func TestLayerClaims(t *testing.T) {
	p := []policy.Policy{{Effect: policy.Allow, Actions: []string{"*"}, Resources: []string{"*"},
		Assertions: map[string]string{"alice": `context.auth.claims.sub == "alice"`}}}
	req := policy.Request{Operation: "SELECT", Resource: "financial.KVValue", Claims: map[string]any{"sub": "bob"}}
	err := policy.Check(context.Background(), req,
		policy.Layer{Name: "replayer", Policies: []policy.Policy{allow([]string{"*"}, "*")}},
		policy.Layer{Name: policy.LayerPrincipal, Policies: p, Claims: map[string]any{"sub": "alice"}})
	if err != nil {
		t.Fatalf("the layer's claims must be used: %v", err)
	}
	err = policy.Check(context.Background(), req, policy.Layer{Name: policy.LayerPrincipal, Policies: p})
	if err == nil {
		t.Fatal("without the layer's claims, the request's claims apply")
	}
}

// A struct document is read through its JSON form.
func TestStructDocument(t *testing.T) {
	type doc struct {
		Kind string `json:"kind"`
	}
	p := []policy.Policy{{Effect: policy.Allow, Actions: []string{"INVOKE"}, Resources: []string{"actions.Action"},
		Assertions: map[string]string{"kind": `context.document.kind == "tool"`}}}
	err := policy.Check(context.Background(), policy.Request{Operation: "INVOKE", Resource: "actions.Action", Document: doc{Kind: "tool"}},
		policy.Layer{Name: policy.LayerTool, Policies: p})
	if err != nil {
		t.Fatal(err)
	}
}

// ACT-127, ACT-128, ACT-129, ACT-130, ACT-131, ACT-132: a denial names the
// operation, resource and denying layer, with a hint; its public text leaves
// out the principal's identifier, the policy index and action IDs, which its
// Detail keeps.
func TestLayersAndDenials_ACT127_ACT132(t *testing.T) {
	const principalID = "prn_7f3c2a9e-41d0-4b6e-8c1a-5d2e9f0a7b31"
	const actionID = "0b6a4c4e-2f7e-4c55-9d43-6a3f4e2b8d10"
	everything := []policy.Policy{allow([]string{"*"}, "*")}
	selectOnly := []policy.Policy{deny([]string{"DELETE"}, "auth.*"), allow([]string{"SELECT"}, "financial.*")}
	layers := func(principal, server, tool []policy.Policy) []policy.Layer {
		return []policy.Layer{
			{Name: policy.LayerPrincipal, Policies: principal, PrincipalID: principalID},
			{Name: policy.LayerServer, Policies: server, ActionID: "3c1e4d1a-7a1b-4bde-9b7e-6b8f3f0c5a21"},
			{Name: policy.LayerTool, Policies: tool, ActionID: actionID},
		}
	}
	req := policy.Request{Operation: "INSERT", Resource: "financial.KVValue"}
	cases := []struct {
		name   string
		layers []policy.Layer
		layer  string
		phrase string
		index  int
	}{
		{"principal denies first", layers(selectOnly, selectOnly, selectOnly), policy.LayerPrincipal, "the principal's policies", -1},
		{"server narrows the principal", layers(everything, selectOnly, everything), policy.LayerServer, "the server's policies", -1},
		{"tool narrows the server", layers(everything, everything, []policy.Policy{allow([]string{"*"}, "*"), deny([]string{"INSERT", "UPDATE"}, "financial.*")}), policy.LayerTool, "the tool's policies", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := policy.Check(context.Background(), req, c.layers...)
			var denied *policy.Denied
			if !errors.As(err, &denied) {
				t.Fatalf("want *Denied, got %v", err)
			}
			if denied.ErrorCode() != "ACCESS_DENIED" || denied.Layer != c.layer || denied.PolicyIndex != c.index {
				t.Fatalf("denial %+v", denied)
			}
			public := denied.Error() + " " + denied.Hint()
			for _, want := range []string{"INSERT", "financial.KVValue", c.phrase} {
				if !strings.Contains(denied.Error(), want) {
					t.Fatalf("message %q lacks %q", denied.Error(), want)
				}
			}
			if denied.Hint() == "" || !strings.Contains(denied.Hint(), "INSERT") {
				t.Fatalf("hint %q", denied.Hint())
			}
			for _, secret := range []string{principalID, actionID, "3c1e4d1a", "prn_", "policy", "index", "[1]", " 1 "} {
				if secret == "policy" {
					// the phrase names "policies", never one policy
					if strings.Contains(strings.ReplaceAll(public, "policies", ""), secret) {
						t.Fatalf("public text %q names a single policy", public)
					}
					continue
				}
				if strings.Contains(public, secret) {
					t.Fatalf("public text %q leaks %q", public, secret)
				}
			}
			detail := denied.Detail()
			b, _ := json.Marshal(detail)
			if detail.PolicyIndex != c.index || detail.Layer != c.layer {
				t.Fatalf("detail %s", b)
			}
			if c.layer == policy.LayerPrincipal && detail.PrincipalID != principalID {
				t.Fatalf("detail %s lacks the principal", b)
			}
			if c.layer == policy.LayerTool && detail.ActionID != actionID {
				t.Fatalf("detail %s lacks the action id", b)
			}
		})
	}
	if err := policy.Check(context.Background(), policy.Request{Operation: "SELECT", Resource: "financial.KVValue"},
		layers(everything, selectOnly, everything)...); err != nil {
		t.Fatalf("SELECT passes every layer: %v", err)
	}
	if err := policy.Check(context.Background(), req); err == nil {
		t.Fatal("no layers must deny")
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name     string
		policies []policy.Policy
		path     string
	}{
		{"unknown effect", []policy.Policy{{Effect: "MAYBE", Actions: []string{"*"}, Resources: []string{"*"}}}, "[0].effect"},
		{"no actions", []policy.Policy{allow([]string{"*"}, "*"), {Effect: policy.Allow, Resources: []string{"*"}}}, "[1].actions"},
		{"no resources", []policy.Policy{allow([]string{"*"})}, "[0].resources"},
		{"blank action", []policy.Policy{allow([]string{"SELECT", " "}, "*")}, "[0].actions[1]"},
		{"assertion does not compile", []policy.Policy{{Effect: policy.Allow, Actions: []string{"*"}, Resources: []string{"*"}, Assertions: map[string]string{"x": `context.auth.claims.sub ==`}}}, "[0].assertions.x"},
		{"assertion reads an unknown variable", []policy.Policy{{Effect: policy.Allow, Actions: []string{"*"}, Resources: []string{"*"}, Assertions: map[string]string{"x": `claims.sub == "a"`}}}, "[0].assertions.x"},
		{"assertion is not a bool", []policy.Policy{{Effect: policy.Allow, Actions: []string{"*"}, Resources: []string{"*"}, Assertions: map[string]string{"x": `"yes"`}}}, "[0].assertions.x"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var invalid *policy.InvalidError
			if err := policy.Validate(c.policies); !errors.As(err, &invalid) || invalid.Path() != c.path {
				t.Fatalf("want an InvalidError at %s, got %v", c.path, err)
			}
		})
	}
	ok := []policy.Policy{allow([]string{"SELECT"}, "financial.*"), {Effect: policy.Deny, Actions: []string{"actions:*"}, Resources: []string{"*"},
		Assertions: map[string]string{"own": `context.document.owner == context.auth.claims.sub`}}}
	if err := policy.Validate(ok); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkCheck(b *testing.B) {
	principal := []policy.Policy{
		allow([]string{"SELECT", "INSERT", "UPDATE"}, "financial.*"),
		allow([]string{"SELECT", "INVOKE"}, "actions.*"),
		deny([]string{"DELETE"}, "*"),
	}
	server := []policy.Policy{
		allow([]string{"*"}, "financial.*"),
		{Effect: policy.Allow, Actions: []string{"INVOKE"}, Resources: []string{"actions.Action"},
			Assertions: map[string]string{"tools": `context.document.kind == "tool"`}},
	}
	tool := []policy.Policy{allow([]string{"SELECT", "INSERT"}, "financial.KVValue")}
	layers := []policy.Layer{
		{Name: policy.LayerPrincipal, Policies: principal, PrincipalID: "p"},
		{Name: policy.LayerServer, Policies: server, ActionID: "s"},
		{Name: policy.LayerTool, Policies: tool, ActionID: "t"},
	}
	ctx := context.Background()
	b.Run("no assertions", func(b *testing.B) {
		req := policy.Request{Operation: "INSERT", Resource: "financial.KVValue", Claims: map[string]any{"sub": "u"}}
		b.ReportAllocs()
		for b.Loop() {
			if err := policy.Check(ctx, req, layers...); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("with assertion", func(b *testing.B) {
		req := policy.Request{Operation: "INVOKE", Resource: "actions.Action", Claims: map[string]any{"sub": "u"},
			Document: map[string]any{"kind": "tool"}}
		b.ReportAllocs()
		for b.Loop() {
			if err := policy.Check(ctx, req, layers[:2]...); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("denied", func(b *testing.B) {
		req := policy.Request{Operation: "UPDATE", Resource: "financial.KVValue"}
		b.ReportAllocs()
		for b.Loop() {
			if err := policy.Check(ctx, req, layers...); err == nil {
				b.Fatal("want denied")
			}
		}
	})
}
