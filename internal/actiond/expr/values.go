package expr

import (
	"fmt"
	"reflect"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
)

// The checker sees the platform's types as opaque; at run time their values
// report a type of the same name that carries the operator traits, so the
// standard +, -, *, /, unary - and comparisons dispatch to them.
var (
	decimalType = types.NewOpaqueType("decimal")
	moneyType   = types.NewOpaqueType("money")
	dateType    = types.NewOpaqueType("date")

	decimalRuntimeType = types.NewTypeValue("decimal",
		traits.AdderType, traits.SubtractorType, traits.MultiplierType,
		traits.DividerType, traits.NegatorType, traits.ComparerType)
	moneyRuntimeType = types.NewTypeValue("money",
		traits.AdderType, traits.SubtractorType, traits.MultiplierType,
		traits.DividerType, traits.NegatorType, traits.ComparerType)
	dateRuntimeType = types.NewTypeValue("date", traits.ComparerType)
)

func celError(err error) ref.Val { return types.WrapErr(err) }

func compareInts(c int) ref.Val { return types.Int(c) }

// decimalVal is a Decimal inside CEL.
type decimalVal struct{ Decimal }

func (d decimalVal) ConvertToNative(typeDesc reflect.Type) (any, error) {
	switch typeDesc {
	case reflect.TypeFor[Decimal]():
		return d.Decimal, nil
	case reflect.TypeFor[string]():
		return d.String(), nil
	case reflect.TypeFor[any]():
		return d.Decimal, nil
	}
	return nil, fmt.Errorf("decimal: no conversion to %v", typeDesc)
}

func (d decimalVal) ConvertToType(t ref.Type) ref.Val {
	switch t.TypeName() {
	case types.StringType.TypeName():
		return types.String(d.String())
	case decimalType.TypeName():
		return d
	case types.TypeType.TypeName():
		return decimalType
	}
	return types.NewErr("type conversion error from decimal to %s", t.TypeName())
}

func (d decimalVal) Equal(other ref.Val) ref.Val {
	o, ok := other.(decimalVal)
	return types.Bool(ok && d.Cmp(o.Decimal) == 0)
}

func (d decimalVal) Type() ref.Type { return decimalRuntimeType }
func (d decimalVal) Value() any     { return d.Decimal }

func (d decimalVal) Compare(other ref.Val) ref.Val {
	o, ok := other.(decimalVal)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return compareInts(d.Cmp(o.Decimal))
}

func decimalResult(d Decimal, err error) ref.Val {
	if err != nil {
		return celError(err)
	}
	return decimalVal{d}
}

func (d decimalVal) Add(other ref.Val) ref.Val {
	o, ok := other.(decimalVal)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return decimalResult(d.Decimal.Add(o.Decimal))
}

func (d decimalVal) Subtract(other ref.Val) ref.Val {
	o, ok := other.(decimalVal)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return decimalResult(d.Decimal.Sub(o.Decimal))
}

func (d decimalVal) Multiply(other ref.Val) ref.Val {
	switch o := other.(type) {
	case decimalVal:
		return decimalResult(d.Decimal.Mul(o.Decimal))
	case moneyVal:
		return o.Multiply(d)
	}
	return types.MaybeNoSuchOverloadErr(other)
}

func (d decimalVal) Divide(other ref.Val) ref.Val {
	o, ok := other.(decimalVal)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return decimalResult(d.Decimal.Quo(o.Decimal))
}

func (d decimalVal) Negate() ref.Val { return decimalVal{d.Neg()} }

// moneyVal is a Money inside CEL.
type moneyVal struct{ Money }

func (m moneyVal) ConvertToNative(typeDesc reflect.Type) (any, error) {
	switch typeDesc {
	case reflect.TypeFor[Money](), reflect.TypeFor[any]():
		return m.Money, nil
	case reflect.TypeFor[string]():
		return m.String(), nil
	}
	return nil, fmt.Errorf("money: no conversion to %v", typeDesc)
}

func (m moneyVal) ConvertToType(t ref.Type) ref.Val {
	switch t.TypeName() {
	case types.StringType.TypeName():
		return types.String(m.String())
	case moneyType.TypeName():
		return m
	case types.TypeType.TypeName():
		return moneyType
	}
	return types.NewErr("type conversion error from money to %s", t.TypeName())
}

func (m moneyVal) Equal(other ref.Val) ref.Val {
	o, ok := other.(moneyVal)
	return types.Bool(ok && m.Currency == o.Currency && m.Amount.Cmp(o.Amount) == 0)
}

func (m moneyVal) Type() ref.Type { return moneyRuntimeType }
func (m moneyVal) Value() any     { return m.Money }

func (m moneyVal) peer(other ref.Val) (Money, ref.Val) {
	o, ok := other.(moneyVal)
	if !ok {
		return Money{}, types.MaybeNoSuchOverloadErr(other)
	}
	if err := m.sameCurrency(o.Money); err != nil {
		return Money{}, celError(err)
	}
	return o.Money, nil
}

func (m moneyVal) Compare(other ref.Val) ref.Val {
	o, failed := m.peer(other)
	if failed != nil {
		return failed
	}
	return compareInts(m.Amount.Cmp(o.Amount))
}

func (m moneyVal) with(amount Decimal, err error) ref.Val {
	if err != nil {
		return celError(err)
	}
	return moneyVal{Money{Amount: amount, Currency: m.Currency}}
}

func (m moneyVal) Add(other ref.Val) ref.Val {
	o, failed := m.peer(other)
	if failed != nil {
		return failed
	}
	return m.with(m.Amount.Add(o.Amount))
}

func (m moneyVal) Subtract(other ref.Val) ref.Val {
	o, failed := m.peer(other)
	if failed != nil {
		return failed
	}
	return m.with(m.Amount.Sub(o.Amount))
}

func scalar(v ref.Val) (Decimal, bool) {
	switch s := v.(type) {
	case decimalVal:
		return s.Decimal, true
	case types.Int:
		return DecimalFromInt(int64(s)), true
	}
	return Decimal{}, false
}

func (m moneyVal) Multiply(other ref.Val) ref.Val {
	factor, ok := scalar(other)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return m.with(m.Amount.Mul(factor))
}

func (m moneyVal) Divide(other ref.Val) ref.Val {
	divisor, ok := scalar(other)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return m.with(m.Amount.Quo(divisor))
}

func (m moneyVal) Negate() ref.Val {
	return moneyVal{Money{Amount: m.Amount.Neg(), Currency: m.Currency}}
}

// dateVal is a Date inside CEL.
type dateVal struct{ Date }

func (d dateVal) ConvertToNative(typeDesc reflect.Type) (any, error) {
	switch typeDesc {
	case reflect.TypeFor[Date](), reflect.TypeFor[any]():
		return d.Date, nil
	case reflect.TypeFor[string]():
		return d.String(), nil
	}
	return nil, fmt.Errorf("date: no conversion to %v", typeDesc)
}

func (d dateVal) ConvertToType(t ref.Type) ref.Val {
	switch t.TypeName() {
	case types.StringType.TypeName():
		return types.String(d.String())
	case types.TimestampType.TypeName():
		return types.Timestamp{Time: d.Time()}
	case dateType.TypeName():
		return d
	case types.TypeType.TypeName():
		return dateType
	}
	return types.NewErr("type conversion error from date to %s", t.TypeName())
}

func (d dateVal) Equal(other ref.Val) ref.Val {
	o, ok := other.(dateVal)
	return types.Bool(ok && d.Date == o.Date)
}

func (d dateVal) Type() ref.Type { return dateRuntimeType }
func (d dateVal) Value() any     { return d.Date }

func (d dateVal) Compare(other ref.Val) ref.Val {
	o, ok := other.(dateVal)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return compareInts(d.Cmp(o.Date))
}
