package expr

import (
	"fmt"
	"io"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"github.com/google/uuid"

	"github.com/incusspawn/isx/internal/clock"
)

// pureFunctions declares the platform's functions that read neither the
// clock nor randomness.
func pureFunctions() []cel.EnvOption {
	return []cel.EnvOption{
		cel.Function("uuid",
			cel.Overload("uuid_string", []*cel.Type{cel.StringType}, cel.StringType,
				cel.UnaryBinding(parseUUID))),
		cel.Function("decimal",
			cel.Overload("decimal_string", []*cel.Type{cel.StringType}, decimalType,
				cel.UnaryBinding(func(v ref.Val) ref.Val {
					return decimalResult(ParseDecimal(string(v.(types.String))))
				})),
			cel.Overload("decimal_int", []*cel.Type{cel.IntType}, decimalType,
				cel.UnaryBinding(func(v ref.Val) ref.Val {
					return decimalVal{DecimalFromInt(int64(v.(types.Int)))}
				})),
			cel.Overload("decimal_decimal", []*cel.Type{decimalType}, decimalType,
				cel.UnaryBinding(func(v ref.Val) ref.Val { return v }))),
		cel.Function("round",
			cel.MemberOverload("decimal_round_int", []*cel.Type{decimalType, cel.IntType}, decimalType,
				cel.BinaryBinding(func(d, places ref.Val) ref.Val {
					return decimalResult(d.(decimalVal).Round(int(places.(types.Int))))
				}))),
		cel.Function("money",
			cel.Overload("money_string_string", []*cel.Type{cel.StringType, cel.StringType}, moneyType,
				cel.BinaryBinding(func(amount, currency ref.Val) ref.Val {
					d, err := ParseDecimal(string(amount.(types.String)))
					if err != nil {
						return celError(err)
					}
					return newMoneyVal(d, currency)
				})),
			cel.Overload("money_decimal_string", []*cel.Type{decimalType, cel.StringType}, moneyType,
				cel.BinaryBinding(func(amount, currency ref.Val) ref.Val {
					return newMoneyVal(amount.(decimalVal).Decimal, currency)
				}))),
		cel.Function("amount",
			cel.MemberOverload("money_amount", []*cel.Type{moneyType}, decimalType,
				cel.UnaryBinding(func(m ref.Val) ref.Val { return decimalVal{m.(moneyVal).Amount} }))),
		cel.Function("currency",
			cel.MemberOverload("money_currency", []*cel.Type{moneyType}, cel.StringType,
				cel.UnaryBinding(func(m ref.Val) ref.Val { return types.String(m.(moneyVal).Currency) }))),
		cel.Function("date",
			cel.Overload("date_string", []*cel.Type{cel.StringType}, dateType,
				cel.UnaryBinding(func(v ref.Val) ref.Val {
					d, err := ParseDate(string(v.(types.String)))
					if err != nil {
						return celError(err)
					}
					return dateVal{d}
				})),
			cel.Overload("date_timestamp", []*cel.Type{cel.TimestampType}, dateType,
				cel.UnaryBinding(func(v ref.Val) ref.Val { return dateVal{DateOf(v.(types.Timestamp).Time)} }))),
		cel.Function("string",
			cel.Overload("string_decimal", []*cel.Type{decimalType}, cel.StringType,
				cel.UnaryBinding(func(v ref.Val) ref.Val { return types.String(v.(decimalVal).String()) })),
			cel.Overload("string_money", []*cel.Type{moneyType}, cel.StringType,
				cel.UnaryBinding(func(v ref.Val) ref.Val { return types.String(v.(moneyVal).String()) })),
			cel.Overload("string_date", []*cel.Type{dateType}, cel.StringType,
				cel.UnaryBinding(func(v ref.Val) ref.Val { return types.String(v.(dateVal).String()) }))),
		cel.Function("timestamp",
			cel.Overload("timestamp_date", []*cel.Type{dateType}, cel.TimestampType,
				cel.UnaryBinding(func(v ref.Val) ref.Val { return types.Timestamp{Time: v.(dateVal).Time()} }))),
		operatorDeclarations(),
	}
}

// operatorDeclarations adds type-checker overloads to the standard operators.
// They carry no bindings: the standard library dispatches operators through
// the values' traits (see values.go).
func operatorDeclarations() cel.EnvOption {
	binary := func(op, id string, lhs, rhs, result *cel.Type) cel.EnvOption {
		return cel.Function(op, cel.Overload(id, []*cel.Type{lhs, rhs}, result))
	}
	options := []cel.EnvOption{
		binary(operators.Add, "add_decimal_decimal", decimalType, decimalType, decimalType),
		binary(operators.Subtract, "subtract_decimal_decimal", decimalType, decimalType, decimalType),
		binary(operators.Multiply, "multiply_decimal_decimal", decimalType, decimalType, decimalType),
		binary(operators.Divide, "divide_decimal_decimal", decimalType, decimalType, decimalType),
		binary(operators.Add, "add_money_money", moneyType, moneyType, moneyType),
		binary(operators.Subtract, "subtract_money_money", moneyType, moneyType, moneyType),
		binary(operators.Multiply, "multiply_money_decimal", moneyType, decimalType, moneyType),
		binary(operators.Multiply, "multiply_money_int", moneyType, cel.IntType, moneyType),
		binary(operators.Multiply, "multiply_decimal_money", decimalType, moneyType, moneyType),
		binary(operators.Divide, "divide_money_decimal", moneyType, decimalType, moneyType),
		binary(operators.Divide, "divide_money_int", moneyType, cel.IntType, moneyType),
		cel.Function(operators.Negate,
			cel.Overload("negate_decimal", []*cel.Type{decimalType}, decimalType),
			cel.Overload("negate_money", []*cel.Type{moneyType}, moneyType)),
	}
	comparisons := map[string]string{
		operators.Less: "less", operators.LessEquals: "less_equals",
		operators.Greater: "greater", operators.GreaterEquals: "greater_equals",
	}
	for op, name := range comparisons {
		for typeName, t := range map[string]*cel.Type{"decimal": decimalType, "money": moneyType, "date": dateType} {
			options = append(options, binary(op, name+"_"+typeName+"_"+typeName, t, t, cel.BoolType))
		}
	}
	return func(e *cel.Env) (*cel.Env, error) {
		var err error
		for _, option := range options {
			if e, err = option(e); err != nil {
				return nil, err
			}
		}
		return e, nil
	}
}

func newMoneyVal(amount Decimal, currency ref.Val) ref.Val {
	m, err := NewMoney(amount, string(currency.(types.String)))
	if err != nil {
		return celError(err)
	}
	return moneyVal{m}
}

func parseUUID(v ref.Val) ref.Val {
	id, err := uuid.Parse(string(v.(types.String)))
	if err != nil {
		return celError(fmt.Errorf("uuid: %q is not a UUID", string(v.(types.String))))
	}
	return types.String(id.String())
}

// impureFunctions declares uuid.New() and time.Now(), reading the injected
// clock and randomness.
func impureFunctions(now clock.Clock, random io.Reader) []cel.EnvOption {
	return []cel.EnvOption{
		cel.Function("uuid.New",
			cel.Overload("uuid_new", []*cel.Type{}, cel.StringType,
				cel.FunctionBinding(func(...ref.Val) ref.Val {
					id, err := uuid.NewRandomFromReader(random)
					if err != nil {
						return celError(fmt.Errorf("uuid.New: reading randomness: %w", err))
					}
					return types.String(id.String())
				}))),
		cel.Function("time.Now",
			cel.Overload("time_now", []*cel.Type{}, cel.TimestampType,
				cel.FunctionBinding(func(...ref.Val) ref.Val {
					return types.Timestamp{Time: now.Now().UTC()}
				}))),
	}
}
