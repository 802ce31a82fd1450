package anyschema

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/incusspawn/isx/internal/mcpkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type shade string

type args struct {
	Name   string            `json:"name" pattern:"^[a-z]{1,8}$"`
	Count  *int              `json:"count,omitempty" minimum:"1" maximum:"3"`
	Shade  shade             `json:"shade"`
	Note   string            `json:"note,omitempty" maxLength:"5"`
	Items  []item            `json:"items,omitempty" minItems:"1" maxItems:"2"`
	Labels map[string]string `json:"labels,omitempty"`
	On     bool              `json:"on,omitempty"`
	Ratio  float64           `json:"ratio,omitempty" minimum:"0" maximum:"1"`
}

type item struct {
	Size int    `json:"size" minimum:"1"`
	Tag  string `json:"tag,omitempty" enum:"a|b"`
}

type result struct {
	OK bool `json:"ok"`
}

var tool = mcpkit.NewTool[args, result](mcpkit.Spec{Name: "t", Types: []mcpkit.TypeSchema{mcpkit.Enum[shade]("dark", "light")}})

// corpus are arguments, valid and not, that both validators judge.
var corpus = []string{
	`{"name":"ab","shade":"dark"}`,
	`{"name":"ab","shade":"dark","count":2,"note":"héllo","items":[{"size":1,"tag":"a"}],"labels":{"x":"y"},"on":true,"ratio":0.5}`,
	`{"name":"AB","shade":"dark"}`,
	`{"shade":"dark"}`,
	`{"name":"ab"}`,
	`{"name":"ab","shade":"grey"}`,
	`{"name":"ab","shade":"dark","count":0}`,
	`{"name":"ab","shade":"dark","count":4}`,
	`{"name":"ab","shade":"dark","count":2.5}`,
	`{"name":"ab","shade":"dark","count":2.0}`,
	`{"name":"ab","shade":"dark","count":"2"}`,
	`{"name":"ab","shade":"dark","note":"toolong"}`,
	`{"name":"ab","shade":"dark","note":"ééééé"}`,
	`{"name":"ab","shade":"dark","items":[]}`,
	`{"name":"ab","shade":"dark","items":[{"size":1},{"size":1},{"size":1}]}`,
	`{"name":"ab","shade":"dark","items":[{"size":0}]}`,
	`{"name":"ab","shade":"dark","items":[{"size":1,"tag":"c"}]}`,
	`{"name":"ab","shade":"dark","items":[{"size":1,"extra":1}]}`,
	`{"name":"ab","shade":"dark","items":[{}]}`,
	`{"name":"ab","shade":"dark","labels":{"x":1}}`,
	`{"name":"ab","shade":"dark","on":"yes"}`,
	`{"name":"ab","shade":"dark","ratio":1.5}`,
	`{"name":"ab","shade":"dark","other":1}`,
	`{"name":null,"shade":"dark"}`,
	`{"name":"ab","shade":"dark","count":null}`,
	`{"name":"ab","shade":"dark","items":null}`,
}

// The checker mcpkit uses for its own tool schemas agrees with the general
// validator on every argument of the corpus: the same verdict, the same
// value at fault and the same sentence.
func TestToolCheckerAgreesWithTheGeneralValidator(t *testing.T) {
	general, err := Compile(tool.InputSchema())
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range corpus {
		_, checked := tool.Decode(json.RawMessage(raw))
		full := general.ValidateJSON([]byte(raw))
		if (checked == nil) != (full == nil) {
			t.Errorf("%s: mcpkit says %v, the general validator %v", raw, checked, full)
			continue
		}
		if checked == nil {
			continue
		}
		var a, b *mcpkit.InvalidError
		if !errors.As(checked, &a) || !errors.As(full, &b) {
			t.Errorf("%s: not InvalidErrors: %v / %v", raw, checked, full)
			continue
		}
		if a.Path != b.Path {
			t.Errorf("%s: mcpkit names %q, the general validator %q (%s / %s)", raw, a.Path, b.Path, a.Message, b.Message)
		}
	}
}

// FuzzToolChecker holds the two validators' verdicts against each other on
// arguments the fuzzer makes up.
func FuzzToolChecker(f *testing.F) {
	for _, raw := range corpus {
		f.Add(raw)
	}
	general, err := Compile(tool.InputSchema())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		var probe map[string]any
		if json.Unmarshal([]byte(raw), &probe) != nil || probe == nil {
			return
		}
		_, checked := tool.Decode(json.RawMessage(raw))
		full := general.ValidateJSON([]byte(raw))
		if full == nil && checked != nil {
			t.Fatalf("%s: valid for the general validator, refused by mcpkit: %v", raw, checked)
		}
		if full != nil && checked == nil {
			t.Fatalf("%s: accepted by mcpkit, invalid for the general validator: %v", raw, full)
		}
	})
}

func TestCompileRefusesOutsideReferences(t *testing.T) {
	_, err := Compile(map[string]any{"$ref": "https://example.com/schema.json"})
	if err == nil || !strings.Contains(err.Error(), "may not reference") {
		t.Fatalf("err = %v", err)
	}
}

func TestMessagesNameTheValue(t *testing.T) {
	v, err := Compile(map[string]any{"type": "object", "properties": map[string]any{
		"n": map[string]any{"type": "integer", "maximum": 3}}, "required": []any{"n"}, "additionalProperties": false})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		`{"n":9}`:         "n is 9; give at most 3",
		`{}`:              "n is required",
		`{"n":1,"m":2}`:   `this tool takes no argument "m"`,
		`{"n":"x"}`:       "n must be a whole number, not a string",
		`not json at all`: "the value is not JSON",
	}
	for raw, want := range cases {
		err := v.ValidateJSON([]byte(raw))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", raw, err, want)
		}
	}
}

// Explain says every way a value fails, in words and without the address
// the schema was compiled under, and reads a missing required property
// beside an undeclared one spelt nearly like it as a typo.
func TestExplainListsViolationsAndTypos(t *testing.T) {
	v, err := Compile(map[string]any{"type": "object", "properties": map[string]any{
		"name":  map[string]any{"type": "string"},
		"count": map[string]any{"type": "integer", "maximum": 3},
		"tags": map[string]any{"type": "array", "items": map[string]any{"type": "object",
			"properties": map[string]any{"label": map[string]any{"type": "string"}}, "required": []any{"label"}}},
	}, "required": []any{"name", "count"}})
	if err != nil {
		t.Fatal(err)
	}
	strict, err := Compile(map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}},
		"required": []any{"name"}, "additionalProperties": false})
	if err != nil {
		t.Fatal(err)
	}
	short, err := Compile(map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}, "required": []any{"n"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		v     *Validator
		value map[string]any
		want  string
	}{
		{v, map[string]any{"nme": "x", "count": 1}, "unknown property nme (did you mean name?)"},
		{v, map[string]any{"name": "x", "count": "many"}, "count must be a whole number, not a string"},
		{v, map[string]any{"name": 7, "count": 9}, "count is 9; give at most 3; name must be a string, not a number"},
		{v, map[string]any{"name": "x", "count": 1, "tags": []any{map[string]any{"lable": "a"}}}, "tags[0]: unknown property lable (did you mean label?)"},
		{v, map[string]any{"title": "x", "count": 1}, "name is required"},
		{strict, map[string]any{"nme": "x"}, "unknown property nme (did you mean name?)"},
		{strict, map[string]any{"nam": "x", "colour": "red"}, `unknown property nam (did you mean name?); this tool takes no argument "colour"; see the inputSchema`},
		{short, map[string]any{"nn": 21}, "unknown property nn (did you mean n?)"},
		{short, map[string]any{"n": "x"}, "n must be a whole number, not a string"},
	} {
		err := c.v.Explain(c.value)
		if err == nil || err.Error() != c.want {
			t.Errorf("%v: %v, want %q", c.value, err, c.want)
		}
		var invalid *mcpkit.InvalidError
		if !errors.As(err, &invalid) || strings.Contains(err.Error(), "mem://") || strings.Contains(err.Error(), "jsonschema") {
			t.Errorf("%v: %#v", c.value, err)
		}
	}
	if err := v.Explain(map[string]any{"name": "x", "count": 1}); err != nil {
		t.Errorf("a valid value: %v", err)
	}
}

// A schema that breaks the meta-schema is refused at its place, in words.
func TestCompileSaysWhereASchemaIsInvalid(t *testing.T) {
	_, err := Compile(map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer", "minimum": "zero"}}})
	if err == nil || !strings.Contains(err.Error(), "properties.n.minimum must be a number, not a string") || strings.Contains(err.Error(), "mem://") {
		t.Fatalf("err = %v", err)
	}
	_, err = Compile(map[string]any{"type": "objekt"})
	if err == nil || strings.Contains(err.Error(), "mem://") || !strings.Contains(err.Error(), "type") {
		t.Fatalf("err = %v", err)
	}
}
