package anyschema

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/incusspawn/isx/internal/mcpkit"
	"github.com/incusspawn/isx/internal/spelling"
)

// maxSentences bounds how many violations Explain lists: past a few, the
// value is more wrong than a list helps with.
const maxSentences = 5

// Explain is Validate for a person fixing a whole value, such as a tool's
// arguments: its failure lists every way the value fails (up to a few),
// each at its place, and reads a required property that is missing beside
// an undeclared one spelt nearly like it as the typo it is: "unknown
// property nme (did you mean name?)". The validator's own report stays
// beneath, as the error's cause.
func (v *Validator) Explain(value any) error {
	err := v.schema.Validate(value)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return mcpkit.NewInvalid("", strings.ReplaceAll(err.Error(), location, ""), err)
	}
	var violations []mcpkit.Violation
	for _, leaf := range leaves(verr, nil) {
		violations = append(violations, violation(leaf))
	}
	// The validator walks properties in map order; a person (and a test)
	// reads the same value's faults in the same order every time.
	slices.SortStableFunc(violations, func(a, b mcpkit.Violation) int {
		return strings.Compare(mcpkit.PathOf(a.Location), mcpkit.PathOf(b.Location))
	})
	typos := map[string]string{} // "<path>\x00<undeclared>" → the required name it misspells
	var sentences []string
	for _, vio := range violations {
		if vio.Keyword != "required" {
			continue
		}
		var missing []string
		for _, name := range vio.Names {
			typo := v.typoOf(value, vio.Location, name)
			if typo == "" {
				missing = append(missing, name)
				continue
			}
			typos[mcpkit.PathOf(vio.Location)+"\x00"+typo] = name
			sentences = append(sentences, within(vio.Location, "unknown property "+typo+" (did you mean "+name+"?)"))
		}
		if len(missing) > 0 {
			vio.Names = missing
			sentences = append(sentences, vio.Sentence())
		}
	}
	for _, vio := range violations {
		switch vio.Keyword {
		case "required":
			continue
		case "additionalProperties":
			// An undeclared property read as a typo is said once.
			var others []string
			for _, name := range vio.Names {
				if _, typo := typos[mcpkit.PathOf(vio.Location)+"\x00"+name]; !typo {
					others = append(others, name)
				}
			}
			if len(others) == 0 {
				continue
			}
			vio.Names = others
		}
		sentences = append(sentences, vio.Sentence())
	}
	sentences = distinct(sentences)
	if len(sentences) > maxSentences {
		sentences = append(sentences[:maxSentences], "and "+strconv.Itoa(len(sentences)-maxSentences)+" more")
	}
	first := violations[0]
	return mcpkit.NewInvalid(mcpkit.PathOf(first.Location), strings.Join(sentences, "; "), err)
}

// leaves are the failures beneath e that a person can fix, as deepest
// finds one: every branch followed down, a oneOf kept whole.
func leaves(e *jsonschema.ValidationError, into []*jsonschema.ValidationError) []*jsonschema.ValidationError {
	if _, oneOf := e.ErrorKind.(*kind.OneOf); oneOf || len(e.Causes) == 0 {
		return append(into, e)
	}
	for _, cause := range e.Causes {
		into = leaves(cause, into)
	}
	return into
}

// typoOf is the property of the object at location that its schema does
// not declare and that is spelt nearly as name; "" when there is none, or
// the schema at that place cannot be told.
func (v *Validator) typoOf(value any, location []string, name string) string {
	object, ok := at(value, location).(map[string]any)
	if !ok {
		return ""
	}
	declared := propertiesAt(v.schema, location)
	if declared == nil {
		return ""
	}
	var undeclared []string
	for key := range object {
		if _, ok := declared[key]; !ok {
			undeclared = append(undeclared, key)
		}
	}
	// Ties go to the first in order, so the order is fixed.
	slices.Sort(undeclared)
	for _, key := range undeclared {
		if spelling.Nearest(key, []string{name}) == name {
			return key
		}
	}
	return ""
}

// at is the value at a location; nil when there is none.
func at(value any, location []string) any {
	for _, part := range location {
		switch v := value.(type) {
		case map[string]any:
			value = v[part]
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(v) {
				return nil
			}
			value = v[i]
		default:
			return nil
		}
	}
	return value
}

// propertiesAt are the properties the schema declares for the object at a
// location, following properties, items and $ref; nil when the way there
// goes through anything else (a combinator, a pattern).
func propertiesAt(s *jsonschema.Schema, location []string) map[string]*jsonschema.Schema {
	for _, part := range location {
		s = resolved(s)
		if s == nil {
			return nil
		}
		if _, err := strconv.Atoi(part); err == nil {
			items, _ := s.Items.(*jsonschema.Schema)
			if s.Items2020 != nil {
				items = s.Items2020
			}
			s = items
			continue
		}
		s = s.Properties[part]
	}
	s = resolved(s)
	if s == nil {
		return nil
	}
	return s.Properties
}

// resolved follows $ref to the schema that declares something.
func resolved(s *jsonschema.Schema) *jsonschema.Schema {
	for depth := 0; s != nil && s.Properties == nil && s.Ref != nil && depth < 32; depth++ {
		s = s.Ref
	}
	return s
}

// within puts a sentence about a property at its object's place.
func within(location []string, sentence string) string {
	if path := mcpkit.PathOf(location); path != "" {
		return path + ": " + sentence
	}
	return sentence
}

func distinct(list []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
