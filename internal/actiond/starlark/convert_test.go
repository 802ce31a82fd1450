package starlark

import (
	"encoding/json"
	"math"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	star "go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

func TestFromJSON(t *testing.T) {
	huge, ok := new(big.Int).SetString("123456789012345678901234567890", 10)
	if !ok {
		t.Fatal("bad literal")
	}
	type record struct {
		A int      `json:"a"`
		B []string `json:"b"`
	}
	for _, tc := range []struct {
		name string
		in   any
		want string // the Starlark repr
	}{
		{"nil", nil, "None"},
		{"bool", true, "True"},
		{"string", "héllo", `"héllo"`},
		{"integral float is int", float64(3), "3"},
		{"negative integral float", float64(-7), "-7"},
		{"fraction stays float", 1.5, "1.5"},
		{"float past 2^53 stays float", 1e300, "1e+300"},
		{"int64", int64(math.MaxInt64), "9223372036854775807"},
		{"uint64", uint64(math.MaxUint64), "18446744073709551615"},
		{"int", 42, "42"},
		{"json.Number int", json.Number("12"), "12"},
		{"json.Number big int", json.Number(huge.String()), huge.String()},
		{"json.Number float", json.Number("2.25"), "2.25"},
		{"json.Number exponent", json.Number("1e3"), "1000"},
		{"object keys sorted", map[string]any{"b": 1.0, "a": []any{"x", nil}}, `{"a": ["x", None], "b": 1}`},
		{"other types through encoding/json", record{A: 1, B: []string{"x"}}, `{"a": 1, "b": ["x"]}`},
		{"typed map", map[string]string{"k": "v"}, `{"k": "v"}`},
		{"time as its JSON", time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), `"2024-01-02T03:04:05Z"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fromJSON(tc.in, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
	for _, bad := range []any{func() {}, make(chan int), complex(1, 2), json.Number("x1")} {
		if _, err := fromJSON(bad, nil); err == nil {
			t.Errorf("%T: no error", bad)
		}
	}
}

func TestToJSON(t *testing.T) {
	huge := star.MakeBigInt(new(big.Int).Lsh(big.NewInt(1), 70))
	dict := star.NewDict(2)
	if err := dict.SetKey(star.String("z"), star.MakeInt(1)); err != nil {
		t.Fatal(err)
	}
	if err := dict.SetKey(star.String("a"), star.Tuple{star.None, star.Float(0.5)}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		in   star.Value
		want any
	}{
		{"None", star.None, nil},
		{"bool", star.False, false},
		{"string", star.String("s"), "s"},
		{"int", star.MakeInt(-3), int64(-3)},
		{"big int keeps its digits", huge, json.Number("1180591620717411303424")},
		{"float", star.Float(2.5), 2.5},
		{"dict and tuple", dict, map[string]any{"z": int64(1), "a": []any{nil, 0.5}}},
		{"list", star.NewList([]star.Value{star.MakeInt(1)}), []any{int64(1)}},
		{"struct", starlarkstruct.FromStringDict(starlarkstruct.Default, star.StringDict{"k": star.True}), map[string]any{"k": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := toJSON(tc.in, "x", nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}
	nested := star.NewDict(1)
	if err := nested.SetKey(star.String("f"), star.NewList([]star.Value{star.MakeInt(1), star.NewBuiltin("len", nil)})); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in   star.Value
		want string
	}{
		{nested, `x["f"][1] is a value of type builtin_function_or_method, which is not JSON`},
		{star.Float(math.Inf(1)), "x is the float +inf, which JSON cannot represent"},
		{star.Bytes("b"), "x is a value of type bytes"},
		{star.NewSet(0), "x is a value of type set"},
	} {
		_, err := toJSON(tc.in, "x", nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}

// Converting to Starlark and back gives the same JSON.
func TestJSONRoundTrip(t *testing.T) {
	var in any
	if err := json.Unmarshal([]byte(`{"a":[1,2.5,"x",null,true,{"b":{}}],"n":-0.25,"big":1e20}`), &in); err != nil {
		t.Fatal(err)
	}
	v, err := fromJSON(in, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := toJSON(v, "v", nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		t.Fatalf("%s != %s", a, b)
	}
}
