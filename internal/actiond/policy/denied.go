package policy

import (
	"fmt"

	"github.com/incusspawn/isx/internal/coded"
)

// Why a layer denied.
const (
	ReasonDenyPolicy = "DENY_POLICY" // a DENY policy applied
	ReasonNoAllow    = "NO_ALLOW"    // no ALLOW policy applied
	ReasonNoLayers   = "NO_LAYERS"   // Check was given no layers
)

// Denied is a request a layer refused. Its Error and Hint are safe to return
// to the caller: they name the operation, the resource and the layer, never
// the principal's identifier, the policy index or action IDs (ACT-131).
// Detail keeps those for the record (ACT-132).
type Denied struct {
	// Base is the denial as the wire reads it (coded.Of): its code,
	// message and hint, filled in by coded() from the fields below.
	coded.Base
	Operation string
	Resource  string
	Layer     string
	Reason    string
	// PolicyIndex is the index of the denying DENY policy in its layer, -1
	// when no ALLOW policy applied.
	PolicyIndex     int
	PrincipalID     string
	ActionID        string
	AssertionErrors []AssertionError
}

// ErrorCode is ACCESS_DENIED, also of a Denied made without coded().
func (d *Denied) ErrorCode() string { return CodeAccessDenied }

// ErrorHint is Hint, also of a Denied made without coded().
func (d *Denied) ErrorHint() string { return d.Hint() }

// coded fills in the Base from the fields and returns d.
func (d *Denied) coded() *Denied {
	d.Base = coded.Base{Code: CodeAccessDenied, Message: d.Error(), Hint: d.Hint()}
	return d
}

// Error is the public message.
func (d *Denied) Error() string {
	verb := "is not allowed by"
	if d.Reason == ReasonDenyPolicy {
		verb = "is denied by"
	}
	if d.Reason == ReasonNoLayers {
		return fmt.Sprintf("%s on %s is not allowed: no policies apply", d.Operation, d.Resource)
	}
	return fmt.Sprintf("%s on %s %s %s", d.Operation, d.Resource, verb, layerPhrase(d.Layer))
}

// Hint says what the caller can do, naming the layer by name alone.
func (d *Denied) Hint() string {
	switch d.Layer {
	case LayerPrincipal:
		return fmt.Sprintf("Your own permissions do not include %s on %s: ask an administrator to grant it, or do something that does not need it.", d.Operation, d.Resource)
	case LayerServer:
		return fmt.Sprintf("This MCP server's policies do not include %s on %s: use a tool that does not need it, or ask the server's owner to change its policies.", d.Operation, d.Resource)
	case LayerTool:
		return fmt.Sprintf("The tool's own policies do not include %s on %s: call a tool meant for it, or ask the tool's owner to change its policies.", d.Operation, d.Resource)
	case LayerAgent:
		return fmt.Sprintf("The agent's own policies do not include %s on %s: use a tool that does not need it, or ask the agent's owner to change its policies.", d.Operation, d.Resource)
	}
	return fmt.Sprintf("The policies that apply here do not include %s on %s.", d.Operation, d.Resource)
}

func layerPhrase(layer string) string {
	switch layer {
	case LayerPrincipal:
		return "the principal's policies"
	case LayerServer:
		return "the server's policies"
	case LayerTool:
		return "the tool's policies"
	case LayerAgent:
		return "the agent's policies"
	case "":
		return "the policies"
	}
	return "the " + layer + " policies"
}

// Detail is the denial in full, for the execution's recorded error.
type Detail struct {
	Operation       string           `json:"operation"`
	Resource        string           `json:"resource"`
	Layer           string           `json:"layer"`
	Reason          string           `json:"reason"`
	PolicyIndex     int              `json:"policyIndex"`
	PrincipalID     string           `json:"principalId,omitempty"`
	ActionID        string           `json:"actionId,omitempty"`
	AssertionErrors []AssertionError `json:"assertionErrors,omitempty"`
}

// Detail returns the denial in full.
func (d *Denied) Detail() Detail {
	return Detail{
		Operation:       d.Operation,
		Resource:        d.Resource,
		Layer:           d.Layer,
		Reason:          d.Reason,
		PolicyIndex:     d.PolicyIndex,
		PrincipalID:     d.PrincipalID,
		ActionID:        d.ActionID,
		AssertionErrors: d.AssertionErrors,
	}
}
