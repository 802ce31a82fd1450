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
