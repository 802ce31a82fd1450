package mcpkit

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/incusspawn/isx/internal/coded"
)

// InvalidError is a value that does not match its schema. Path names the
// value at fault the way a person writes it (tasks[0].task_id), empty for
// the whole value; Message is a sentence that includes it.
type InvalidError struct {
	coded.Base
	Path string
}

// CodeInvalid is the code of an *InvalidError. Each wire says it in its own
// words (isx's invalid_argument, actiond's action_input_invalid), since
// whose fault a mismatch is depends on whose value it is.
const CodeInvalid = "schema_mismatch"

// NewInvalid is a mismatch of the value at path (empty for the whole
// value), told in message, caused by err.
func NewInvalid(path, message string, err error) *InvalidError {
	return &InvalidError{Base: coded.Base{Code: CodeInvalid, Message: message, Err: err}, Path: path}
}

// Error is the message alone, which says the cause where it helps.
func (e *InvalidError) Error() string { return e.Message }

// Violation is one way a value fails its schema, as both validators report
// it, so that a person reads the same sentence whichever found it.
type Violation struct {
	// Location is the path to the value, one element per property name or
	// array index.
	Location []string
	// Keyword is the schema keyword that failed: type, required, pattern …
	Keyword string
	// Got and Want are the value found and what the keyword asks for, as
	// text (a number, a pattern, a length, a JSON type).
	Got, Want string
	// Names are the properties a required or additionalProperties names,
	// or the allowed values of an enum, or the JSON types of a type.
	Names []string
}

// Error is the violation as an *InvalidError.
func (v Violation) Error(cause error) *InvalidError {
	return NewInvalid(PathOf(v.Location), v.Sentence(), cause)
}

// PathOf writes a location the way a person does: a.b[0].c.
func PathOf(location []string) string {
	var b strings.Builder
	for _, part := range location {
		if _, err := strconv.Atoi(part); err == nil && b.Len() > 0 {
			b.WriteString("[" + part + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(part)
	}
	return b.String()
}

// Sentence says what is wrong and what is accepted.
func (v Violation) Sentence() string {
	subject := PathOf(v.Location)
	if subject == "" {
		subject = "the value"
	}
	switch v.Keyword {
	case "required":
		names := make([]string, len(v.Names))
		for i, m := range v.Names {
			names[i] = joinPath(subject, m)
		}
		return strings.Join(names, ", ") + " is required"
	case "additionalProperties":
		where := "this tool takes"
		if subject != "the value" {
			where = subject + " takes"
		}
		return fmt.Sprintf("%s no argument %s; see the inputSchema", where, quoteAll(v.Names))
	case "type":
		return fmt.Sprintf("%s must be %s, not %s", subject, typeWords(v.Names), article(v.Got))
	case "pattern":
		return fmt.Sprintf("%s %s is not allowed: it must match %s", subject, clipQuote(v.Got), v.Want)
	case "minLength":
		return fmt.Sprintf("%s is %s characters long; at least %s are required", subject, v.Got, v.Want)
	case "maxLength":
		return fmt.Sprintf("%s is %s characters long; at most %s are accepted", subject, v.Got, v.Want)
	case "minimum":
		return fmt.Sprintf("%s is %s; give at least %s", subject, v.Got, v.Want)
	case "maximum":
		return fmt.Sprintf("%s is %s; give at most %s", subject, v.Got, v.Want)
	case "exclusiveMinimum":
		return fmt.Sprintf("%s is %s; give more than %s", subject, v.Got, v.Want)
	case "exclusiveMaximum":
		return fmt.Sprintf("%s is %s; give less than %s", subject, v.Got, v.Want)
	case "minItems":
		return fmt.Sprintf("%s has %s items; at least %s are required", subject, v.Got, v.Want)
	case "maxItems":
		return fmt.Sprintf("%s has %s items; at most %s are accepted", subject, v.Got, v.Want)
	case "enum":
		return fmt.Sprintf("%s %s is not one of %s", subject, clipQuote(v.Got), strings.Join(v.Names, ", "))
	case "const":
		return fmt.Sprintf("%s must be %s", subject, v.Want)
	case "oneOf":
		return fmt.Sprintf("%s matches none of the forms its schema allows", subject)
	case "false":
		return fmt.Sprintf("%s is not allowed here", subject)
	}
	return fmt.Sprintf("%s does not match its schema (%s)", subject, v.Keyword)
}

func joinPath(parent, name string) string {
	if parent == "the value" {
		return name
	}
	return parent + "." + name
}

func quoteAll(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = clipQuote(n)
	}
	return strings.Join(quoted, ", ")
}

func clipQuote(s string) string {
	const max = 80
	if len(s) > max {
		cut := max
		for cut > 0 && s[cut]&0xC0 == 0x80 {
			cut--
		}
		s = s[:cut] + "…"
	}
	return strconv.Quote(s)
}

func typeWords(want []string) string {
	words := make([]string, len(want))
	for i, w := range want {
		words[i] = article(w)
	}
	return strings.Join(words, " or ")
}

func article(jsonType string) string {
	switch jsonType {
	case "integer":
		return "a whole number"
	case "number":
		return "a number"
	case "string":
		return "a string"
	case "boolean":
		return "true or false"
	case "object":
		return "an object"
	case "array":
		return "an array"
	case "null":
		return "null"
	}
	return jsonType
}

// ValueText is a value as a violation shows it: a string as itself,
// anything else as JSON.
func ValueText(value any) string {
	if s, ok := value.(string); ok {
		return s
	}
	raw, err := json.Marshal(value)
	if err != nil {
		return fmt.Sprint(value)
	}
	return string(raw)
}

// NumberText is a number as a violation shows it: whole numbers without a
// fraction.
func NumberText(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'f', -1, 64)
}
