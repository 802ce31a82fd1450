package expr

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/interpreter"
)

// MaxBuiltBytes bounds the string replace, join and format may build. CEL's
// cost is counted once a call has answered, so a call whose answer is much
// larger than its arguments ("x".repeat by replace: s.replace("", s) is
// len(s)² long) would allocate it all before any limit could stop it; the
// size of their answer is worked out from their arguments first.
const MaxBuiltBytes = 16 << 20

// ErrBuildLimit is wrapped by the error of a call refused by MaxBuiltBytes.
var ErrBuildLimit = errors.New("the string is larger than an expression may build")

// boundedCalls decorates the calls whose answer can be far larger than
// their arguments.
func boundedCalls(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
	call, ok := i.(interpreter.InterpretableCall)
	if !ok {
		return i, nil
	}
	var size func(args []ref.Val) int64
	switch call.Function() {
	case "replace":
		size = replacedSize
	case "join":
		size = joinedSize
	case "format", "strings.format":
		size = formattedSize
	default:
		return i, nil
	}
	return &boundedCall{InterpretableCall: call, size: size}, nil
}

// boundedCall evaluates its arguments, refuses an answer past
// MaxBuiltBytes, and only then makes the call (whose arguments, free of
// side effects, are evaluated again).
type boundedCall struct {
	interpreter.InterpretableCall
	size func(args []ref.Val) int64
}

func (c *boundedCall) Exec(frame *interpreter.ExecutionFrame) ref.Val {
	args := c.Args()
	values := make([]ref.Val, len(args))
	for i, arg := range args {
		v := arg.Exec(frame)
		if types.IsUnknownOrError(v) {
			return v
		}
		values[i] = v
	}
	if n := c.size(values); n > MaxBuiltBytes {
		return types.WrapErr(fmt.Errorf("%w: %s would build %d bytes, past the limit of %d", ErrBuildLimit, c.Function(), n, MaxBuiltBytes))
	}
	return c.InterpretableCall.Exec(frame)
}

func (c *boundedCall) Eval(activation interpreter.Activation) ref.Val {
	frame, err := interpreter.NewExecutionFrame(activation)
	if err != nil {
		return types.WrapErr(err)
	}
	defer frame.Close()
	return c.Exec(frame)
}

func stringOf(v ref.Val) (string, bool) {
	s, ok := v.(types.String)
	return string(s), ok
}

// replacedSize is s.replace(old, new[, n])'s length.
func replacedSize(args []ref.Val) int64 {
	if len(args) < 3 {
		return 0
	}
	s, ok1 := stringOf(args[0])
	old, ok2 := stringOf(args[1])
	repl, ok3 := stringOf(args[2])
	if !ok1 || !ok2 || !ok3 {
		return 0
	}
	count := int64(strings.Count(s, old))
	if old == "" {
		count = int64(utf8.RuneCountInString(s)) + 1
	}
	if len(args) > 3 {
		if n, ok := args[3].(types.Int); ok && n >= 0 {
			count = min(count, int64(n))
		}
	}
	return int64(len(s)) + count*(int64(len(repl))-int64(len(old)))
}

// joinedSize is list.join([sep])'s length.
func joinedSize(args []ref.Val) int64 {
	if len(args) == 0 {
		return 0
	}
	list, ok := args[0].(traits.Lister)
	if !ok {
		return 0
	}
	sep := ""
	if len(args) > 1 {
		sep, _ = stringOf(args[1])
	}
	var n, count int64
	it := list.Iterator()
	for it.HasNext() == types.True {
		if s, ok := stringOf(it.Next()); ok {
			n += int64(len(s))
		}
		count++
		if n > MaxBuiltBytes {
			return n
		}
	}
	return n + max(count-1, 0)*int64(len(sep))
}

// formattedSize bounds "...".format(args): the format, and the text of
// every argument, which a placeholder shows at most once.
func formattedSize(args []ref.Val) int64 {
	if len(args) == 0 {
		return 0
	}
	format, _ := stringOf(args[0])
	n := int64(len(format))
	for _, arg := range args[1:] {
		n += textSize(arg, MaxBuiltBytes-n)
		if n > MaxBuiltBytes {
			return n
		}
	}
	return n
}

// textSize is about the length of v's text, stopping once past limit.
func textSize(v ref.Val, limit int64) int64 {
	switch v := v.(type) {
	case types.String:
		return int64(len(v)) + 2
	case types.Bytes:
		return 4*int64(len(v)) + 3
	case traits.Mapper:
		var n int64 = 2
		it := v.Iterator()
		for it.HasNext() == types.True && n <= limit {
			key := it.Next()
			n += textSize(key, limit-n) + textSize(v.Get(key), limit-n) + 4
		}
		return n
	case traits.Lister:
		var n int64 = 2
		it := v.Iterator()
		for it.HasNext() == types.True && n <= limit {
			n += textSize(it.Next(), limit-n) + 2
		}
		return n
	}
	return 32
}
