package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/incusspawn/isx/internal/actiond/expr"
)

// CodeAccessDenied is the GraphQL code of a denial.
const CodeAccessDenied = "ACCESS_DENIED"

// Layer names the seed uses in denials.
const (
	LayerPrincipal = "principal"
	LayerServer    = "server"
	LayerTool      = "tool"
	// LayerAgent is a callable agent's own policies, beneath which each of
	// its tool calls runs.
	LayerAgent = "agent"
)

// Request is one operation on one resource.
type Request struct {
	// Operation is what is done, such as SELECT, INSERT or INVOKE.
	Operation string
	// Resource is <namespace>.<resource>, such as financial.KVValue.
	Resource string
	// Claims are the verified token's claims, context.auth.claims in
	// assertions, unless a layer carries its own.
	Claims map[string]any
	// Document is the record the operation touches, context.document in
	// assertions: for INVOKE of an action, its definition. JSON-shaped
	// values are used as they are; anything else is converted through JSON.
	Document any
}

// Layer is one set of policies that narrows the ones before it.
type Layer struct {
	// Name is the layer a denial names: LayerPrincipal, LayerServer,
	// LayerTool, or another word.
	Name     string
	Policies []Policy
	// PrincipalID and ActionID are kept in the denial's Detail for the
	// record, never in its message.
	PrincipalID string
	ActionID    string
	// Claims, when not nil, replace the request's claims for this layer, so
	// that a replay evaluates the original principal with the original
	// request's claims.
	Claims map[string]any
}

// AssertionError is an assertion that failed to evaluate; its policy did not
// apply.
type AssertionError struct {
	Layer       string `json:"layer"`
	PolicyIndex int    `json:"policyIndex"`
	Assertion   string `json:"assertion"`
	Message     string `json:"message"`
}

// Decision is the outcome of Evaluate.
type Decision struct {
	// Denied is nil when every layer allows.
	Denied *Denied
	// AssertionErrors lists the assertions that failed to evaluate, in every
	// layer evaluated, so a caller can record them also when access was
	// allowed.
	AssertionErrors []AssertionError
}

// Err is the decision as an error: nil or the *Denied.
func (d Decision) Err() error {
	if d.Denied == nil {
		return nil
	}
	return d.Denied
}

// Check evaluates the layers in order and returns the first denial as a
// *Denied, or nil. A layer with no applying ALLOW policy denies, so a layer
// with no policies denies everything: a caller that means "no restriction"
// leaves the layer out. No layers at all is a denial too.
func Check(ctx context.Context, req Request, layers ...Layer) error {
	return Evaluate(ctx, req, layers...).Err()
}

// Evaluate is Check with the assertion failures of an allowed request.
func Evaluate(ctx context.Context, req Request, layers ...Layer) Decision {
	var decision Decision
	if len(layers) == 0 {
		decision.Denied = (&Denied{Operation: req.Operation, Resource: req.Resource, Reason: ReasonNoLayers, PolicyIndex: -1}).coded()
		return decision
	}
	var shared map[string]any // built once, only when an assertion needs it
	for _, layer := range layers {
		claims := req.Claims
		if layer.Claims != nil {
			claims = layer.Claims
		}
		layerContext := func() map[string]any {
			if layer.Claims == nil {
				if shared == nil {
					shared = assertionContext(req.Claims, req.Document)
				}
				return shared
			}
			return assertionContext(claims, req.Document)
		}
		denied, failures := evaluateLayer(ctx, req, layer, layerContext)
		decision.AssertionErrors = append(decision.AssertionErrors, failures...)
		if denied != nil {
			denied.AssertionErrors = slices.Clone(decision.AssertionErrors)
			decision.Denied = denied
			return decision
		}
	}
	return decision
}

func evaluateLayer(ctx context.Context, req Request, layer Layer, contextOf func() map[string]any) (*Denied, []AssertionError) {
	var failures []AssertionError
	allowed := false
	for i, p := range layer.Policies {
		if !matchAny(p.Actions, req.Operation) || !matchAny(p.Resources, req.Resource) {
			continue
		}
		applies, failure := assertionsHold(ctx, p, contextOf)
		if failure != nil {
			failure.Layer, failure.PolicyIndex = layer.Name, i
			failures = append(failures, *failure)
			continue
		}
		if !applies {
			continue
		}
		if p.Effect == Deny {
			return layer.denial(req, ReasonDenyPolicy, i), failures
		}
		if p.Effect == Allow {
			allowed = true
		}
	}
	if !allowed {
		return layer.denial(req, ReasonNoAllow, -1), failures
	}
	return nil, failures
}

func (l Layer) denial(req Request, reason string, index int) *Denied {
	d := &Denied{
		Operation:   req.Operation,
		Resource:    req.Resource,
		Layer:       l.Name,
		Reason:      reason,
		PolicyIndex: index,
		PrincipalID: l.PrincipalID,
		ActionID:    l.ActionID,
	}
	return d.coded()
}

func assertionsHold(ctx context.Context, p Policy, contextOf func() map[string]any) (bool, *AssertionError) {
	if len(p.Assertions) == 0 {
		return true, nil
	}
	names := slices.Sorted(maps.Keys(p.Assertions))
	vars := map[string]any{"context": contextOf()}
	for _, name := range names {
		program, err := compileAssertion(p.Assertions[name])
		if err == nil {
			var holds bool
			holds, err = program.EvalBool(ctx, vars)
			if err == nil && !holds {
				return false, nil
			}
		}
		if err != nil {
			return false, &AssertionError{Assertion: name, Message: err.Error()}
		}
	}
	return true, nil
}

func assertionContext(claims map[string]any, document any) map[string]any {
	if claims == nil {
		claims = map[string]any{}
	}
	return map[string]any{
		"auth":     map[string]any{"claims": claims},
		"document": jsonShaped(document),
	}
}

// jsonShaped returns v when CEL can read it as it is, and its JSON
// round trip otherwise (a struct such as an action definition).
func jsonShaped(v any) any {
	switch v.(type) {
	case nil, map[string]any, []any, string, bool, float64, int64, int:
		return v
	}
	b, err := json.Marshal(v)
	if err != nil {
		return map[string]any{}
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return map[string]any{}
	}
	return out
}

// Assertions compile once per text and stay cached: the same policies are
// checked on every call. The cache is bounded; when full it starts over.
const maxCachedAssertions = 4096

var (
	assertionEnv   = sync.OnceValues(func() (*expr.Env, error) { return expr.NewEnv(expr.Variables("context")) })
	assertionMu    sync.RWMutex
	assertionCache = map[string]*expr.Program{}
)

func compileAssertion(src string) (*expr.Program, error) {
	assertionMu.RLock()
	program, ok := assertionCache[src]
	assertionMu.RUnlock()
	if ok {
		return program, nil
	}
	env, err := assertionEnv()
	if err != nil {
		return nil, err
	}
	program, err = env.Compile(src)
	if err != nil {
		return nil, err
	}
	if t := program.ResultType(); t != "bool" && t != "dyn" {
		return nil, fmt.Errorf("assertion %q produces %s; it must produce a bool", src, t)
	}
	assertionMu.Lock()
	if len(assertionCache) >= maxCachedAssertions {
		clear(assertionCache)
	}
	assertionCache[src] = program
	assertionMu.Unlock()
	return program, nil
}
