package action

import (
	"slices"
	"unicode/utf8"
)

// The stated intent argument (seed "Stated intent").
const (
	IntentProperty    = "intent"
	IntentMaxLength   = 1024
	intentDescription = "Why you make this call: one sentence, 1 to 1,024 characters. It is recorded for whoever reviews this session."
	headerAnnotation  = "x-mcp-header"
	propertiesKeyword = "properties"
	requiredKeyword   = "required"
)

// EffectiveInputSchema is a tool's inputSchema as an MCP server lists it
// (ACT-080, ACT-081, ACT-286..294): without the reference's fixed-input
// properties (also removed from required), without any x-mcp-header
// annotation anywhere, and with the intent property when intent is on,
// required under REQUIRED. The schema given is not modified.
func EffectiveInputSchema(schema map[string]any, ref ToolRef, intent Intent) map[string]any {
	out, _ := withoutHeaders(schema).(map[string]any)
	if out == nil {
		out = map[string]any{}
	}
	if _, ok := out["type"]; !ok {
		out["type"] = "object"
	}
	properties, _ := out[propertiesKeyword].(map[string]any)
	if properties == nil {
		properties = map[string]any{}
	}
	required := requiredNames(out)
	for name := range ref.Input {
		delete(properties, name)
		required = slices.DeleteFunc(required, func(r string) bool { return r == name })
	}
	if intent == "" {
		intent = IntentRequired
	}
	if intent != IntentNone {
		properties[IntentProperty] = map[string]any{
			"type":        "string",
			"minLength":   1,
			"maxLength":   IntentMaxLength,
			"description": intentDescription,
		}
		required = slices.DeleteFunc(required, func(r string) bool { return r == IntentProperty })
		if intent == IntentRequired {
			required = append(required, IntentProperty)
		}
	}
	out[propertiesKeyword] = properties
	if len(required) == 0 {
		delete(out, requiredKeyword)
	} else {
		list := make([]any, len(required))
		for i, name := range required {
			list[i] = name
		}
		out[requiredKeyword] = list
	}
	return out
}

// withoutHeaders deep-copies a JSON value, dropping every x-mcp-header key.
func withoutHeaders(value any) any {
	switch v := value.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, item := range v {
			if k == headerAnnotation {
				continue
			}
			out[k] = withoutHeaders(item)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, item := range v {
			out[i] = withoutHeaders(item)
		}
		return out
	}
	return value
}

func requiredNames(schema map[string]any) []string {
	var names []string
	switch list := schema[requiredKeyword].(type) {
	case []any:
		for _, item := range list {
			if name, ok := item.(string); ok {
				names = append(names, name)
			}
		}
	case []string:
		names = append(names, list...)
	}
	return names
}

// DeclaresIntent reports whether an input schema has its own top-level
// intent property, which an MCP server with intent on cannot offer
// (ACT-295..298).
func DeclaresIntent(schema map[string]any) bool {
	properties, _ := schema[propertiesKeyword].(map[string]any)
	_, ok := properties[IntentProperty]
	return ok
}

// SplitIntent takes the stated intent out of a call's arguments (ACT-288,
// ACT-289, ACT-291, ACT-293). Under REQUIRED it must be there; under OPTIONAL
// it may be; either way it is a string of 1 to 1,024 characters and the
// arguments returned lack it. Under NONE nothing is taken: a tool may then
// have an intent property of its own (ACT-296). A bad or missing intent is a
// BAD_REQUEST *Error at path "intent" whose message asks for one.
func SplitIntent(arguments map[string]any, intent Intent) (string, map[string]any, error) {
	if intent == IntentNone {
		return "", arguments, nil
	}
	raw, present := arguments[IntentProperty]
	rest := make(map[string]any, len(arguments))
	for k, v := range arguments {
		if k != IntentProperty {
			rest[k] = v
		}
	}
	if !present {
		if intent == IntentOptional {
			return "", rest, nil
		}
		return "", nil, badRequest(IntentProperty, "State your intent: pass intent, one sentence of 1 to 1,024 characters saying why you make this call.")
	}
	stated, ok := raw.(string)
	if !ok || stated == "" || utf8.RuneCountInString(stated) > IntentMaxLength {
		return "", nil, badRequest(IntentProperty, "intent must be one sentence of 1 to %d characters saying why you make this call.", IntentMaxLength)
	}
	return stated, rest, nil
}
