package expr_test

import (
	"encoding/json"
	"testing"

	"github.com/incusspawn/isx/internal/actiond/expr"
)

func TestParseDecimal(t *testing.T) {
	valid := map[string]string{
		"10.50": "10.50", "-0.5": "-0.5", "+3": "3", ".25": "0.25", "7.": "7",
		"1.5e2": "150", "15e-1": "1.5", "0.000": "0.000", "-0": "0", " 4 ": "4",
	}
	for in, want := range valid {
		d, err := expr.ParseDecimal(in)
		if err != nil || d.String() != want {
			t.Errorf("ParseDecimal(%q) = %s, %v; want %s", in, d, err, want)
		}
	}
	for _, in := range []string{"", ".", "-", "1.2.3", "1e", "e5", "0x10", "NaN", "Inf", "1,5", "1e101",
		"0.00000000000000000000000000000000001"} {
		if d, err := expr.ParseDecimal(in); err == nil {
			t.Errorf("ParseDecimal(%q) = %s, want an error", in, d)
		}
	}
}

func TestDecimalArithmetic(t *testing.T) {
	d := expr.MustParseDecimal
	cases := []struct {
		name string
		got  func() (expr.Decimal, error)
		want string
	}{
		{"add aligns scales", func() (expr.Decimal, error) { return d("1.1").Add(d("2.25")) }, "3.35"},
		{"sub to negative", func() (expr.Decimal, error) { return d("1").Sub(d("2.50")) }, "-1.50"},
		{"mul sums scales", func() (expr.Decimal, error) { return d("1.5").Mul(d("1.5")) }, "2.25"},
		{"mul rounds past max scale", func() (expr.Decimal, error) {
			third, _ := d("1").Quo(d("3"))
			return third.Mul(third)
		}, "0.1111111111111111111111111111111111"},
		{"quo exact", func() (expr.Decimal, error) { return d("1").Quo(d("8")) }, "0.125"},
		{"quo keeps operand scale", func() (expr.Decimal, error) { return d("9.00").Quo(d("3")) }, "3.00"},
		{"quo of zero", func() (expr.Decimal, error) { return d("0").Quo(d("7.5")) }, "0.0"},
		{"round half even down", func() (expr.Decimal, error) { return d("0.125").Round(2) }, "0.12"},
		{"round half even up", func() (expr.Decimal, error) { return d("0.135").Round(2) }, "0.14"},
		{"round negative", func() (expr.Decimal, error) { return d("-0.135").Round(2) }, "-0.14"},
		{"round keeps shorter", func() (expr.Decimal, error) { return d("1.5").Round(3) }, "1.5"},
	}
	for _, c := range cases {
		got, err := c.got()
		if err != nil || got.String() != c.want {
			t.Errorf("%s: %s, %v; want %s", c.name, got, err, c.want)
		}
	}
	if _, err := d("1").Quo(d("0.00")); err == nil {
		t.Error("division by zero must fail")
	}
	if _, err := d("1").Round(-1); err == nil {
		t.Error("negative places must fail")
	}
	b, _ := json.Marshal(map[string]any{"d": d("10.50"), "m": expr.Money{Amount: d("5"), Currency: "USD"}, "t": expr.Date{Year: 2024, Month: 2, Day: 29}})
	if string(b) != `{"d":"10.50","m":{"amount":"5","currency":"USD"},"t":"2024-02-29"}` {
		t.Errorf("JSON = %s", b)
	}
	if d("2").Cmp(d("2.000")) != 0 || d("-1").Cmp(d("0")) != -1 {
		t.Error("Cmp is numeric")
	}
}
