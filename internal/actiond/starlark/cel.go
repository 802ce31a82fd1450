package starlark

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"

	star "go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"

	"github.com/incusspawn/isx/internal/actiond/expr"
	"github.com/incusspawn/isx/internal/coded"
)

// CEL's pure functions are builtins of every script, evaluated inside it by
// the platform's CEL environment (internal/actiond/expr), so they mean
// exactly what they mean in CEL and no call is recorded:
//
//	decimal("10.50"), decimal(3)        a decimal; d.round(places)
//	money("5", "USD"), money(d, "USD")  a money; m.amount(), m.currency()
//	date("2024-01-31")                  a date
//	uuid("…")                           the UUID, canonical, as a string
//
// Their operators are CEL's: decimal + - * / decimal, money ± money of one
// currency, money * decimal|int, money / decimal|int, unary -, and == < <= >
// >= within a type. An operation CEL does not define, such as decimal + int,
// is an error; convert first: d + decimal(1). str() is CEL's string(); a
// value's JSON form, as a result or a call's input, is the one CEL's
// evaluation gives: a decimal "10.50", a date "2024-01-31", a money
// {"amount": "5.00", "currency": "USD"}.
//
// uuid.New() and time.Now() read randomness and the clock: they are not
// builtins but cel() calls, which the host offers and records.
var pureFunctions = []string{"decimal", "money", "date", "uuid"}

// pureEnv is the environment without the impure functions; every operand
// reaches it as a field of the variable v.
var pureEnv = sync.OnceValues(func() (*expr.Env, error) { return expr.NewEnv(expr.Variables("v")) })

// purePrograms caches compiled expressions. Their texts are made by this
// file from operator and operand kinds, so the set is small and bounded.
var purePrograms sync.Map // string → *expr.Program

func pureBuiltins() star.StringDict {
	d := star.StringDict{}
	for _, name := range pureFunctions {
		d[name] = star.NewBuiltin(name, pureBuiltin)
	}
	d["uuid"] = &uuidFunction{Builtin: d["uuid"].(*star.Builtin)}
	d["time"] = &starlarkstruct.Module{Name: "time", Members: star.StringDict{
		"Now": impure("time.Now()", "the clock"),
		"now": impure("time.Now()", "the clock"),
	}}
	return d
}

func impure(call, reads string) *star.Builtin {
	return star.NewBuiltin(strings.TrimSuffix(call, "()"), func(*star.Thread, *star.Builtin, star.Tuple, []star.Tuple) (star.Value, error) {
		return nil, &Error{Base: coded.Base{
			Code:    CodeActionFailure,
			Message: fmt.Sprintf("%s reads %s, so it is not a builtin: call cel(%q) instead", call, reads, call),
			Hint:    "cel() needs the native tool cel listed, and each call is recorded.",
		}}
	})
}

// uuidFunction is uuid("…"), with uuid.New refused with a pointer to cel().
type uuidFunction struct{ *star.Builtin }

var _ star.HasAttrs = (*uuidFunction)(nil)

func (f *uuidFunction) Attr(name string) (star.Value, error) {
	if name == "New" || name == "new" {
		return impure("uuid.New()", "randomness"), nil
	}
	return nil, nil
}

func (*uuidFunction) AttrNames() []string { return []string{"New"} }

func pureBuiltin(thread *star.Thread, fn *star.Builtin, args star.Tuple, kwargs []star.Tuple) (star.Value, error) {
	if len(kwargs) > 0 {
		return nil, fmt.Errorf("%s takes no keyword arguments", fn.Name())
	}
	var call celCall
	operands := make([]string, len(args))
	for i, arg := range args {
		operand, err := call.operand(arg)
		if err != nil {
			return nil, fmt.Errorf("argument %d: %w", i+1, err)
		}
		operands[i] = operand
	}
	ctx := context.Background()
	if r := runOf(thread); r != nil {
		ctx = r.ctx
	}
	return call.eval(ctx, fn.Name()+"("+strings.Join(operands, ", ")+")")
}

// celCall builds one CEL expression over Starlark operands.
type celCall struct {
	vars map[string]any
}

// operand adds v to the call and returns the typed CEL expression that
// reads it, so that the checker picks the overload and the result's type.
func (c *celCall) operand(v star.Value) (string, error) {
	if c.vars == nil {
		c.vars = map[string]any{}
	}
	name := "o" + strconv.Itoa(len(c.vars))
	field := "v." + name
	switch v := v.(type) {
	case *decimalValue:
		c.vars[name] = v.d.String()
		return "decimal(string(" + field + "))", nil
	case *dateValue:
		c.vars[name] = v.d.String()
		return "date(string(" + field + "))", nil
	case *moneyValue:
		c.vars[name] = v.m.Amount.String()
		currency := "o" + strconv.Itoa(len(c.vars))
		c.vars[currency] = v.m.Currency
		return "money(string(" + field + "), string(v." + currency + "))", nil
	case star.String:
		c.vars[name] = string(v)
		return "string(" + field + ")", nil
	case star.Int:
		i, ok := v.Int64()
		if !ok {
			return "", fmt.Errorf("the int %s does not fit CEL's 64-bit int", v)
		}
		c.vars[name] = i
		return "int(" + field + ")", nil
	case star.Float:
		c.vars[name] = float64(v)
		return "double(" + field + ")", nil
	}
	return "", fmt.Errorf("a %s is not a CEL value", v.Type())
}

// pureError is CEL's coded error told without the expression this file
// generated, which the script never wrote.
type pureError struct{ coded.Base }

func purely(celErr *expr.Error, err error) *pureError {
	return &pureError{coded.Base{Code: celErr.Code, Message: celErr.Message, Err: err}}
}

// Error is the message alone: the cause would repeat the expression.
func (e *pureError) Error() string { return e.Message }

func (c *celCall) eval(ctx context.Context, expression string) (star.Value, error) {
	program, err := pureProgram(expression)
	if err != nil {
		return nil, err
	}
	out, err := program.Eval(ctx, map[string]any{"v": c.vars})
	if err != nil {
		var celErr *expr.Error
		if errors.As(err, &celErr) {
			return nil, purely(celErr, err)
		}
		return nil, err
	}
	return pureResult(program.ResultType(), out)
}

func pureProgram(expression string) (*expr.Program, error) {
	if program, ok := purePrograms.Load(expression); ok {
		return program.(*expr.Program), nil
	}
	env, err := pureEnv()
	if err != nil {
		return nil, err
	}
	program, err := env.Compile(expression)
	if err != nil {
		var celErr *expr.Error
		if errors.As(err, &celErr) {
			return nil, purely(celErr, err)
		}
		return nil, err
	}
	purePrograms.Store(expression, program)
	return program, nil
}

// pureResult turns what CEL evaluated, in its JSON form, back into a value
// of the type the checker gave it.
func pureResult(resultType string, out any) (star.Value, error) {
	switch resultType {
	case "decimal":
		d, err := expr.ParseDecimal(fmt.Sprint(out))
		if err != nil {
			return nil, err
		}
		return &decimalValue{d: d}, nil
	case "date":
		d, err := expr.ParseDate(fmt.Sprint(out))
		if err != nil {
			return nil, err
		}
		return &dateValue{d: d}, nil
	case "money":
		fields, _ := out.(map[string]any)
		amount, err := expr.ParseDecimal(fmt.Sprint(fields["amount"]))
		if err != nil {
			return nil, err
		}
		m, err := expr.NewMoney(amount, fmt.Sprint(fields["currency"]))
		if err != nil {
			return nil, err
		}
		return &moneyValue{m: m}, nil
	case "double":
		if f, ok := out.(float64); ok {
			return star.Float(f), nil
		}
	}
	return fromJSON(out, nil)
}

var celOperators = map[syntax.Token]string{
	syntax.PLUS: "+", syntax.MINUS: "-", syntax.STAR: "*", syntax.SLASH: "/", syntax.PERCENT: "%",
	syntax.EQL: "==", syntax.NEQ: "!=", syntax.LT: "<", syntax.LE: "<=", syntax.GT: ">", syntax.GE: ">=",
}

// binary evaluates x op y in CEL; x is the receiver on side.
func binary(x star.Value, op syntax.Token, y star.Value, side star.Side) (star.Value, error) {
	operator, ok := celOperators[op]
	if !ok {
		return nil, nil
	}
	if side == star.Right {
		x, y = y, x
	}
	var call celCall
	left, err := call.operand(x)
	if err != nil {
		return nil, nil // Starlark reports the unsupported operand types
	}
	right, err := call.operand(y)
	if err != nil {
		return nil, nil
	}
	return call.eval(context.Background(), left+" "+operator+" "+right)
}

func unary(x star.Value, op syntax.Token) (star.Value, error) {
	switch op {
	case syntax.PLUS:
		return x, nil
	case syntax.MINUS:
		var call celCall
		operand, err := call.operand(x)
		if err != nil {
			return nil, err
		}
		return call.eval(context.Background(), "-"+operand)
	}
	return nil, nil
}

func compare(x star.Value, op syntax.Token, y star.Value) (bool, error) {
	out, err := binary(x, op, y, star.Left)
	if err != nil {
		return false, err
	}
	b, ok := out.(star.Bool)
	if !ok {
		return false, fmt.Errorf("%s %s %s is not a bool", x.Type(), op, y.Type())
	}
	return bool(b), nil
}

// method is a CEL member function of a value: d.round(2), m.amount().
func method(receiver star.Value, name string, params int) *star.Builtin {
	return star.NewBuiltin(name, func(thread *star.Thread, fn *star.Builtin, args star.Tuple, kwargs []star.Tuple) (star.Value, error) {
		if len(kwargs) > 0 || len(args) != params {
			return nil, fmt.Errorf("%s.%s takes %d positional arguments", receiver.Type(), name, params)
		}
		var call celCall
		target, err := call.operand(receiver)
		if err != nil {
			return nil, err
		}
		operands := make([]string, len(args))
		for i, arg := range args {
			if operands[i], err = call.operand(arg); err != nil {
				return nil, fmt.Errorf("argument %d: %w", i+1, err)
			}
		}
		return call.eval(context.Background(), target+"."+name+"("+strings.Join(operands, ", ")+")")
	})
}

func hashString(s string) (uint32, error) {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32(), nil
}

// numeric is a decimal's text without trailing fractional zeros, so that
// values CEL calls equal (10.50 and 10.5) hash alike.
func numeric(d expr.Decimal) string {
	s := d.String()
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		s = "0"
	}
	return s
}

// decimalValue is CEL's decimal.
type decimalValue struct{ d expr.Decimal }

var (
	_ star.HasBinary  = (*decimalValue)(nil)
	_ star.HasUnary   = (*decimalValue)(nil)
	_ star.Comparable = (*decimalValue)(nil)
	_ star.HasAttrs   = (*decimalValue)(nil)
	_ jsonValuer      = (*decimalValue)(nil)
)

func (v *decimalValue) String() string        { return v.d.String() }
func (*decimalValue) Type() string            { return "decimal" }
func (*decimalValue) Freeze()                 {}
func (v *decimalValue) Truth() star.Bool      { return v.d.Sign() != 0 }
func (v *decimalValue) Hash() (uint32, error) { return hashString(numeric(v.d)) }
func (v *decimalValue) JSON() (any, error)    { return v.d.String(), nil }
func (v *decimalValue) Binary(op syntax.Token, y star.Value, side star.Side) (star.Value, error) {
	return binary(v, op, y, side)
}
func (v *decimalValue) Unary(op syntax.Token) (star.Value, error) { return unary(v, op) }
func (v *decimalValue) CompareSameType(op syntax.Token, y star.Value, depth int) (bool, error) {
	return compare(v, op, y)
}
func (v *decimalValue) AttrNames() []string { return []string{"round"} }
func (v *decimalValue) Attr(name string) (star.Value, error) {
	if name == "round" {
		return method(v, name, 1), nil
	}
	return nil, nil
}

// moneyValue is CEL's money.
type moneyValue struct{ m expr.Money }

var (
	_ star.HasBinary  = (*moneyValue)(nil)
	_ star.HasUnary   = (*moneyValue)(nil)
	_ star.Comparable = (*moneyValue)(nil)
	_ star.HasAttrs   = (*moneyValue)(nil)
	_ jsonValuer      = (*moneyValue)(nil)
)

func (v *moneyValue) String() string     { return v.m.String() }
func (*moneyValue) Type() string         { return "money" }
func (*moneyValue) Freeze()              {}
func (*moneyValue) Truth() star.Bool     { return star.True }
func (v *moneyValue) JSON() (any, error) { return v.m.JSON(), nil }
func (v *moneyValue) Hash() (uint32, error) {
	return hashString(numeric(v.m.Amount) + " " + v.m.Currency)
}
func (v *moneyValue) Binary(op syntax.Token, y star.Value, side star.Side) (star.Value, error) {
	return binary(v, op, y, side)
}
func (v *moneyValue) Unary(op syntax.Token) (star.Value, error) { return unary(v, op) }
func (v *moneyValue) CompareSameType(op syntax.Token, y star.Value, depth int) (bool, error) {
	return compare(v, op, y)
}
func (v *moneyValue) AttrNames() []string { return []string{"amount", "currency"} }
func (v *moneyValue) Attr(name string) (star.Value, error) {
	if name == "amount" || name == "currency" {
		return method(v, name, 0), nil
	}
	return nil, nil
}

// dateValue is CEL's date.
type dateValue struct{ d expr.Date }

var (
	_ star.Comparable = (*dateValue)(nil)
	_ jsonValuer      = (*dateValue)(nil)
)

func (v *dateValue) String() string        { return v.d.String() }
func (*dateValue) Type() string            { return "date" }
func (*dateValue) Freeze()                 {}
func (*dateValue) Truth() star.Bool        { return star.True }
func (v *dateValue) Hash() (uint32, error) { return hashString(v.d.String()) }
func (v *dateValue) JSON() (any, error)    { return v.d.String(), nil }
func (v *dateValue) CompareSameType(op syntax.Token, y star.Value, depth int) (bool, error) {
	return compare(v, op, y)
}
