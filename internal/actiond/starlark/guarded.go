package starlark

import (
	"fmt"
	"slices"
	"strings"
	"unicode"

	starjson "go.starlark.net/lib/json"
	star "go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"
)

// The hidden builtins rewritten programs call (rewrite.go), and the
// universe's builtins that build values, each measured before it builds.

// guarded are the predeclared names that replace the universe's or that
// rewritten programs call.
var guarded = func() star.StringDict {
	d := star.StringDict{
		hiddenBinary:   hidden(hiddenBinary, 2, binaryBuiltin),
		hiddenUnary:    hidden(hiddenUnary, 2, unaryBuiltin),
		hiddenInplace:  hidden(hiddenInplace, 2, inplaceBuiltin),
		hiddenAugIndex: hidden(hiddenAugIndex, 0, augIndexBuiltin),
		hiddenAugAttr:  hidden(hiddenAugAttr, 0, augAttrBuiltin),
		hiddenSlice:    hidden(hiddenSlice, 1, sliceBuiltin),
		hiddenMethod:   hidden(hiddenMethod, 2, methodBuiltin),
		hiddenCall:     hidden(hiddenCall, 1, callMethodBuiltin),
		hiddenSpread:   hidden(hiddenSpread, 2, spreadBuiltin),
		hiddenTuple:    hidden(hiddenTuple, 1, tupleLiteral),
		hiddenKey:      hidden(hiddenKey, 2, keyBuiltin),
		hiddenChecked:  hidden(hiddenChecked, 4, checkedBuiltin),
		hiddenThen:     hidden(hiddenThen, 3, thenBuiltin),
		"print":        star.NewBuiltin("print", func(*star.Thread, *star.Builtin, star.Tuple, []star.Tuple) (star.Value, error) { return star.None, nil }),
		"json":         guardedJSON,
		"struct":       star.NewBuiltin("struct", structBuiltin),
	}
	for name, measure := range map[string]func(*star.Thread, star.Tuple, []star.Tuple) error{
		"list": measureSequence, "tuple": measureSequence, "reversed": measureSequence, "enumerate": measurePairs,
		"zip": measureZip, "dict": measureDict, "set": measureSet, "str": measureStr, "repr": measureRepr,
		"int": measureInt, "bytes": measureBytes, "fail": measureFail, "min": measureCompared, "max": measureCompared,
		"hash": measureCompared,
	} {
		d[name] = wrap(name, star.Universe[name].(*star.Builtin), measure)
	}
	d["sorted"] = star.NewBuiltin("sorted", sortedBuiltin)
	d["getattr"] = star.NewBuiltin("getattr", getattrBuiltin)
	return d
}()

// hidden is a builtin a rewritten program calls. Calling it takes the
// interpreter more steps than the operation the script wrote (loading the
// builtin, its operator); those steps are given back to the run, so that
// the step limit means what it meant before the rewrite.
func hidden(name string, steps uint64, fn func(*star.Thread, *star.Builtin, star.Tuple, []star.Tuple) (star.Value, error)) *star.Builtin {
	if steps == 0 {
		return star.NewBuiltin(name, fn)
	}
	return star.NewBuiltin(name, func(thread *star.Thread, b *star.Builtin, args star.Tuple, kwargs []star.Tuple) (star.Value, error) {
		if r := runOf(thread); r != nil {
			r.extraSteps += steps
			thread.SetMaxExecutionSteps(r.limits.MaxSteps + r.extraSteps)
		}
		return fn(thread, b, args, kwargs)
	})
}

// Rewritten functions with *args check the tuple the call made.
const (
	hiddenChecked = "$checked"
	hiddenThen    = "$then"
)

// wrap is a builtin that measures its call, then calls the original; what
// the original answers is checked too (a tuple of shared tuples, an
// integer too large).
func wrap(name string, original *star.Builtin, measure func(*star.Thread, star.Tuple, []star.Tuple) error) *star.Builtin {
	return star.NewBuiltin(name, func(thread *star.Thread, _ *star.Builtin, args star.Tuple, kwargs []star.Tuple) (star.Value, error) {
		if err := measure(thread, args, kwargs); err != nil {
			return nil, err
		}
		out, err := star.Call(thread, original, args, kwargs)
		if err != nil {
			return nil, err
		}
		return out, checkResult(out)
	})
}

// checkResult refuses what no operation may make: an integer past
// maxIntBits, a tuple or struct (hashable, so walked whole by a hash)
// past maxExpanded parts.
func checkResult(v star.Value) error {
	switch v := v.(type) {
	case star.Int:
		return checkInt(v)
	case star.Tuple, *starlarkstruct.Struct:
		return checkHashable(v)
	case *star.List:
		// enumerate, zip and items make lists of tuples.
		w := newWalk(maxExpanded)
		w.quick = true
		for i := range v.Len() {
			if t, ok := v.Index(i).(star.Tuple); ok && w.parts(t) > maxExpanded {
				return tooLarge("a tuple", maxExpanded)
			}
		}
	}
	return nil
}

// length is how many elements iterating v gives, counted by iterating when
// v does not say (charging a slot each).
func length(thread *star.Thread, v star.Value) (int64, error) {
	if n := star.Len(v); n >= 0 {
		return int64(n), nil
	}
	iterable, ok := v.(star.Iterable)
	if !ok {
		return 0, nil
	}
	iter := iterable.Iterate()
	defer iter.Done()
	var n int64
	var x star.Value
	for iter.Next(&x) {
		n++
		if n%4096 == 0 {
			if err := budgetOf(thread).charge(4096*slotBytes, "a list"); err != nil {
				return 0, err
			}
			if err := stoppedIn(thread); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

func measureSequence(thread *star.Thread, args star.Tuple, _ []star.Tuple) error {
	if len(args) == 0 {
		return nil
	}
	n, err := length(thread, args[0])
	if err != nil {
		return err
	}
	return budgetOf(thread).charge(headerBytes+n*slotBytes, "a list")
}

func measurePairs(thread *star.Thread, args star.Tuple, _ []star.Tuple) error {
	if len(args) == 0 {
		return nil
	}
	n, err := length(thread, args[0])
	if err != nil {
		return err
	}
	return budgetOf(thread).charge(headerBytes+n*(slotBytes+headerBytes+2*slotBytes), "a list of pairs")
}

func measureZip(thread *star.Thread, args star.Tuple, _ []star.Tuple) error {
	shortest := int64(-1)
	for _, arg := range args {
		n, err := length(thread, arg)
		if err != nil {
			return err
		}
		if shortest < 0 || n < shortest {
			shortest = n
		}
	}
	return budgetOf(thread).charge(headerBytes+max(shortest, 0)*(slotBytes+headerBytes+int64(len(args))*slotBytes), "a list of tuples")
}

func measureDict(thread *star.Thread, args star.Tuple, kwargs []star.Tuple) error {
	n := int64(len(kwargs))
	if len(args) > 0 {
		m, err := length(thread, args[0])
		if err != nil {
			return err
		}
		n += m
		if err := checkKeys(args[0]); err != nil {
			return err
		}
	}
	return budgetOf(thread).charge(headerBytes+n*entryBytes, "a dict")
}

// checkKeys refuses pairs whose keys a hash would walk too long.
func checkKeys(pairs star.Value) error {
	iterable, ok := pairs.(star.Iterable)
	if !ok {
		return nil
	}
	if d, ok := pairs.(*star.Dict); ok {
		return checkParts(d.Keys()...)
	}
	w := newWalk(maxExpanded)
	iter := iterable.Iterate()
	defer iter.Done()
	var pair star.Value
	for iter.Next(&pair) {
		if seq, ok := pair.(star.Indexable); ok && seq.Len() > 0 && w.parts(seq.Index(0)) > maxExpanded {
			return tooLarge("a dict key", maxExpanded)
		}
	}
	return nil
}

func measureSet(thread *star.Thread, args star.Tuple, _ []star.Tuple) error {
	if len(args) == 0 {
		return nil
	}
	n, err := length(thread, args[0])
	if err != nil {
		return err
	}
	if err := checkElements(args[0]); err != nil {
		return err
	}
	return budgetOf(thread).charge(headerBytes+n*entryBytes, "a set")
}

// checkElements refuses an iterable with an element a hash or comparison
// would walk too long.
func checkElements(v star.Value) error {
	iterable, ok := v.(star.Iterable)
	if !ok {
		return nil
	}
	w := newWalk(maxExpanded)
	iter := iterable.Iterate()
	defer iter.Done()
	var elem star.Value
	for iter.Next(&elem) {
		if w.parts(elem) > maxExpanded {
			return tooLarge("an element compared or hashed", maxExpanded)
		}
	}
	return nil
}

func measureStr(thread *star.Thread, args star.Tuple, _ []star.Tuple) error {
	if len(args) == 1 {
		if _, ok := args[0].(star.String); ok {
			return nil // str of a string is the string
		}
	}
	return chargeText(thread, "a string", args...)
}

func measureRepr(thread *star.Thread, args star.Tuple, _ []star.Tuple) error {
	return chargeText(thread, "a string", args...)
}

func measureFail(thread *star.Thread, args star.Tuple, kwargs []star.Tuple) error {
	values := slices.Clone(args)
	for _, kv := range kwargs {
		values = append(values, kv[1])
	}
	return chargeText(thread, "an error message", values...)
}

func measureInt(_ *star.Thread, args star.Tuple, _ []star.Tuple) error {
	if len(args) > 0 {
		if s, ok := args[0].(star.String); ok && len(strings.TrimSpace(string(s))) > maxIntBits+4 {
			return tooLarge(fmt.Sprintf("an integer of %d digits", len(s)), maxIntBits)
		}
	}
	return nil
}

func measureBytes(thread *star.Thread, args star.Tuple, _ []star.Tuple) error {
	if len(args) == 0 {
		return nil
	}
	n := shallowBytes(args[0])
	if _, ok := args[0].(star.String); !ok {
		m, err := length(thread, args[0])
		if err != nil {
			return err
		}
		n = m
	}
	return budgetOf(thread).charge(n, "bytes")
}

func measureCompared(_ *star.Thread, args star.Tuple, _ []star.Tuple) error {
	if len(args) == 1 {
		if err := checkElements(args[0]); err != nil {
			return err
		}
	}
	return checkParts(args...)
}

func structBuiltin(thread *star.Thread, b *star.Builtin, args star.Tuple, kwargs []star.Tuple) (star.Value, error) {
	out, err := starlarkstruct.Make(thread, b, args, kwargs)
	if err != nil {
		return nil, err
	}
	return out, checkResult(out)
}

// binaryBuiltin is x op y, measured.
func binaryBuiltin(thread *star.Thread, _ *star.Builtin, args star.Tuple, _ []star.Tuple) (star.Value, error) {
	op, x, y := syntax.Token(mustInt(args[0])), args[1], args[2]
	switch op {
	case syntax.EQL, syntax.NEQ, syntax.LT, syntax.LE, syntax.GT, syntax.GE:
		if err := checkParts(x, y); err != nil {
			return nil, err
		}
		ok, err := star.Compare(op, x, y)
		if err != nil {
			return nil, err
		}
		return star.Bool(ok), nil
	case syntax.IN, syntax.NOT_IN:
		// A dict or set hashes x; a list or tuple compares x with its
		// elements.
		checked := []star.Value{x}
		switch y.(type) {
		case *star.List, star.Tuple:
			checked = append(checked, y)
		}
		if err := checkParts(checked...); err != nil {
			return nil, err
		}
		return star.Binary(op, x, y)
	}
	if err := chargeBinary(thread, op, x, y); err != nil {
		return nil, err
	}
	out, err := star.Binary(op, x, y)
	if err != nil {
		return nil, err
	}
	return out, checkResult(out)
}

// chargeBinary charges what x op y builds.
func chargeBinary(thread *star.Thread, op syntax.Token, x, y star.Value) error {
	b := budgetOf(thread)
	switch op {
	case syntax.PLUS, syntax.PIPE, syntax.AMP, syntax.CIRCUMFLEX, syntax.MINUS:
		if xi, ok := x.(star.Int); ok {
			if yi, ok := y.(star.Int); ok {
				return b.charge(max(intBytes(xi), intBytes(yi)), "an integer")
			}
		}
		n := shallowBytes(x) + shallowBytes(y)
		if op != syntax.PLUS {
			n = headerBytes + int64(star.Len(x)+star.Len(y))*entryBytes
		}
		return b.charge(n, "a "+x.Type())
	case syntax.STAR:
		if xi, ok := x.(star.Int); ok {
			if yi, ok := y.(star.Int); ok {
				return b.charge(intBytes(xi)+intBytes(yi), "an integer")
			}
		}
		seq, count := x, y
		if _, ok := x.(star.Int); ok {
			seq, count = y, x
		}
		n, ok := count.(star.Int)
		if !ok {
			return nil // Starlark refuses it
		}
		times, fits := n.Int64()
		if !fits {
			return memoryExceeded(b.max, 1<<62, "a "+seq.Type())
		}
		per := shallowBytes(seq)
		switch seq.(type) {
		case *star.List, star.Tuple:
			per -= headerBytes
		}
		if times > 0 && per > 0 && times > (1<<62)/per {
			return memoryExceeded(b.max, 1<<62, "a "+seq.Type())
		}
		return b.charge(max(times, 0)*per, "a "+seq.Type())
	case syntax.PERCENT:
		if _, ok := x.(star.String); ok {
			return chargeFormat(thread, string(x.(star.String)), strings.Count(string(x.(star.String)), "%"), y)
		}
		if xi, ok := x.(star.Int); ok {
			return b.charge(intBytes(xi), "an integer")
		}
	case syntax.LTLT:
		xi, ok1 := x.(star.Int)
		yi, ok2 := y.(star.Int)
		if ok1 && ok2 {
			shift, _ := yi.Int64()
			return b.charge(intBytes(xi)+max(shift, 0)/8, "an integer")
		}
	}
	return nil
}

// chargeFormat charges a formatted string: its format, and each field
// at most the largest of the values it may show.
func chargeFormat(thread *star.Thread, format string, fields int, values ...star.Value) error {
	b := budgetOf(thread)
	if b == nil {
		return nil
	}
	w := newWalk(b.max)
	var largest int64
	for _, v := range values {
		if t, ok := v.(star.Tuple); ok {
			for _, part := range t {
				largest = max(largest, w.text(part))
			}
			continue
		}
		if d, ok := v.(*star.Dict); ok {
			for _, item := range d.Items() {
				largest = max(largest, w.text(item[1]))
			}
		}
		largest = max(largest, w.text(v))
	}
	n := capped(int64(len(format)), min(int64(fields), b.max)*largest, b.max)
	return b.charge(n, "a formatted string")
}

func unaryBuiltin(thread *star.Thread, _ *star.Builtin, args star.Tuple, _ []star.Tuple) (star.Value, error) {
	op, x := syntax.Token(mustInt(args[0])), args[1]
	if i, ok := x.(star.Int); ok {
		if err := budgetOf(thread).charge(intBytes(i), "an integer"); err != nil {
			return nil, err
		}
	}
	return star.Unary(op, x)
}

// inplaceBuiltin is x op= y: a list extended in place, a dict updated in
// place, anything else x op y.
func inplaceBuiltin(thread *star.Thread, _ *star.Builtin, args star.Tuple, _ []star.Tuple) (star.Value, error) {
	op, x, y := augmented(mustInt(args[0])), args[1], args[2]
	return inplace(thread, op, x, y)
}

func inplace(thread *star.Thread, op syntax.Token, x, y star.Value) (star.Value, error) {
	switch x := x.(type) {
	case *star.List:
		if op == syntax.PLUS {
			if iterable, ok := y.(star.Iterable); ok {
				n, err := length(thread, y)
				if err != nil {
					return nil, err
				}
				// Growing the list copies it into a larger array.
				if err := budgetOf(thread).charge((int64(x.Len())+n)*slotBytes, "a list"); err != nil {
					return nil, err
				}
				if same, ok := y.(*star.List); ok && same == x {
					for i := range int(n) {
						if err := x.Append(x.Index(i)); err != nil {
							return nil, fmt.Errorf("cannot apply += to frozen list")
						}
					}
					return x, nil
				}
				iter := iterable.Iterate()
				defer iter.Done()
				var elem star.Value
				for iter.Next(&elem) {
					if err := x.Append(elem); err != nil {
						return nil, fmt.Errorf("cannot apply += to frozen list")
					}
				}
				return x, nil
			}
		}
	case *star.Dict:
		if yd, ok := y.(*star.Dict); ok && op == syntax.PIPE {
			if err := budgetOf(thread).charge(int64(yd.Len())*entryBytes, "a dict"); err != nil {
				return nil, err
			}
			for _, item := range yd.Items() {
				if err := x.SetKey(item[0], item[1]); err != nil {
					return nil, err
				}
			}
			return x, nil
		}
	}
	return binaryBuiltin(thread, nil, star.Tuple{star.MakeInt(int(op)), x, y}, nil)
}

// augmented is the operator of an augmented assignment's token.
func augmented(token int) syntax.Token {
	switch syntax.Token(token) {
	case syntax.PLUS_EQ:
		return syntax.PLUS
	case syntax.MINUS_EQ:
		return syntax.MINUS
	case syntax.STAR_EQ:
		return syntax.STAR
	case syntax.SLASH_EQ:
		return syntax.SLASH
	case syntax.SLASHSLASH_EQ:
		return syntax.SLASHSLASH
	case syntax.PERCENT_EQ:
		return syntax.PERCENT
	case syntax.AMP_EQ:
		return syntax.AMP
	case syntax.PIPE_EQ:
		return syntax.PIPE
	case syntax.CIRCUMFLEX_EQ:
		return syntax.CIRCUMFLEX
	case syntax.LTLT_EQ:
		return syntax.LTLT
	case syntax.GTGT_EQ:
		return syntax.GTGT
	}
	return syntax.Token(token)
}

// augIndexBuiltin is x[i] op= y.
func augIndexBuiltin(thread *star.Thread, _ *star.Builtin, args star.Tuple, _ []star.Tuple) (star.Value, error) {
	x, i, op, y := args[0], args[1], augmented(mustInt(args[2])), args[3]
	old, err := index(x, i)
	if err != nil {
		return nil, err
	}
	updated, err := inplace(thread, op, old, y)
	if err != nil {
		return nil, err
	}
	return star.None, setIndex(x, i, updated)
}

// augAttrBuiltin is x.name op= y.
func augAttrBuiltin(thread *star.Thread, _ *star.Builtin, args star.Tuple, _ []star.Tuple) (star.Value, error) {
	x, name, op, y := args[0], string(args[1].(star.String)), augmented(mustInt(args[2])), args[3]
	old, err := attr(x, name)
	if err != nil {
		return nil, err
	}
	updated, err := inplace(thread, op, old, y)
	if err != nil {
		return nil, err
	}
	setter, ok := x.(star.HasSetField)
	if !ok {
		return nil, fmt.Errorf("can't assign to .%s field of %s", name, x.Type())
	}
	return star.None, setter.SetField(name, updated)
}

func attr(x star.Value, name string) (star.Value, error) {
	if h, ok := x.(star.HasAttrs); ok {
		v, err := h.Attr(name)
		if err != nil {
			return nil, err
		}
		if v != nil {
			return v, nil
		}
	}
	return nil, fmt.Errorf("%s has no .%s field or method", x.Type(), name)
}

// index is x[k] as the interpreter reads it, for x[k] op= y; a missing
// key is named in at most a few hundred characters.
func index(x, k star.Value) (star.Value, error) {
	switch x := x.(type) {
	case star.Mapping:
		if err := checkParts(k); err != nil {
			return nil, err
		}
		v, found, err := x.Get(k)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, fmt.Errorf("key %s not in %s", shortText(k), x.Type())
		}
		return v, nil
	case star.Indexable:
		n := x.Len()
		i, err := star.AsInt32(k)
		if err != nil {
			return nil, fmt.Errorf("%s index: %s", x.Type(), err)
		}
		original := i
		if i < 0 {
			i += n
		}
		if i < 0 || i >= n {
			if n == 0 {
				return nil, fmt.Errorf("index %d out of range: empty %s", original, x.Type())
			}
			return nil, fmt.Errorf("%s index %d out of range [%d:%d]", x.Type(), original, -n, n-1)
		}
		return x.Index(i), nil
	}
	return nil, fmt.Errorf("unhandled index operation %s[%s]", x.Type(), k.Type())
}

func setIndex(x, k, v star.Value) error {
	switch x := x.(type) {
	case star.HasSetKey:
		if err := checkParts(k); err != nil {
			return err
		}
		return x.SetKey(k, v)
	case star.HasSetIndex:
		n := x.Len()
		i, err := star.AsInt32(k)
		if err != nil {
			return err
		}
		original := i
		if i < 0 {
			i += n
		}
		if i < 0 || i >= n {
			return fmt.Errorf("%s index %d out of range [%d:%d]", x.Type(), original, -n, n-1)
		}
		return x.SetIndex(i, v)
	}
	return fmt.Errorf("%s value does not support item assignment", x.Type())
}

// shortText is a value's text cut to what an error message needs, built
// without rendering the whole value.
func shortText(v star.Value) string {
	const limit = 256
	if s, ok := v.(star.String); ok {
		if len(s) > limit {
			return fmt.Sprintf("%q… (%d bytes)", string(s[:limit]), len(s))
		}
		return fmt.Sprintf("%q", string(s))
	}
	if newWalk(limit).text(v) > limit {
		return "(a " + v.Type() + " too large to show)"
	}
	return v.String()
}

// keyBuiltin is a dict literal's key, checked as a hash would walk it.
func keyBuiltin(_ *star.Thread, _ *star.Builtin, args star.Tuple, _ []star.Tuple) (star.Value, error) {
	if err := checkParts(args[0]); err != nil {
		return nil, err
	}
	if newWalk(1<<16).text(args[0]) > 1<<16 {
		return nil, tooLarge("a dict key's text", 1<<16)
	}
	return args[0], nil
}

// tupleLiteral is (a, b, …) with parts that are not all literals.
func tupleLiteral(thread *star.Thread, _ *star.Builtin, args star.Tuple, _ []star.Tuple) (star.Value, error) {
	t := slices.Clone(args)
	if err := budgetOf(thread).charge(headerBytes+int64(len(t))*slotBytes, "a tuple"); err != nil {
		return nil, err
	}
	return t, checkHashable(t)
}

// checkedBuiltin checks the tuple a function's *args made.
func checkedBuiltin(_ *star.Thread, _ *star.Builtin, args star.Tuple, _ []star.Tuple) (star.Value, error) {
	return star.None, checkParts(args...)
}

// thenBuiltin answers its last argument: a lambda's check, then its body.
func thenBuiltin(_ *star.Thread, _ *star.Builtin, args star.Tuple, _ []star.Tuple) (star.Value, error) {
	return args[len(args)-1], nil
}

// spreadBuiltin is what f(*x) or f(**x) spreads: charged as the tuple or
// dict the call makes of it.
func spreadBuiltin(thread *star.Thread, _ *star.Builtin, args star.Tuple, _ []star.Tuple) (star.Value, error) {
	n, err := length(thread, args[0])
	if err != nil {
		return nil, err
	}
	if err := budgetOf(thread).charge(headerBytes+n*entryBytes, "the arguments of a call"); err != nil {
		return nil, err
	}
	return args[0], nil
}

// sliceBuiltin is x[lo:hi:step], the copy charged.
func sliceBuiltin(thread *star.Thread, _ *star.Builtin, args star.Tuple, _ []star.Tuple) (star.Value, error) {
	x := args[0]
	sliceable, ok := x.(star.Sliceable)
	if !ok {
		return nil, fmt.Errorf("invalid slice operand %s", x.Type())
	}
	start, end, step, err := bounds(sliceable.Len(), args[1], args[2], args[3])
	if err != nil {
		return nil, err
	}
	count := int64(0)
	if step > 0 && end > start {
		count = int64((end - start + step - 1) / step)
	} else if step < 0 && start > end {
		count = int64((start - end - step - 1) / -step)
	}
	var per int64
	switch x.(type) {
	case star.String, star.Bytes:
		if step != 1 {
			per = 1
		}
	case *star.List, star.Tuple:
		per = slotBytes
	}
	if err := budgetOf(thread).charge(count*per, "a slice"); err != nil {
		return nil, err
	}
	if str, ok := x.(star.String); ok && step != 1 {
		// Built at its size once, where Starlark's own grows it.
		var b strings.Builder
		b.Grow(int(count))
		for i := start; (step > 0 && i < end) || (step < 0 && i > end); i += step {
			b.WriteByte(str[i])
		}
		return star.String(b.String()), nil
	}
	return sliceable.Slice(start, end, step), nil
}

// bounds are a slice's start, end and step over n elements, as the
// Starlark spec reads them.
func bounds(n int, lo, hi, step star.Value) (int, int, int, error) {
	s := 1
	if step != star.None {
		v, err := star.AsInt32(step)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("invalid slice step: %s", err)
		}
		if v == 0 {
			return 0, 0, 0, fmt.Errorf("zero is not a valid slice step")
		}
		s = v
	}
	var start, end int
	if s > 0 {
		start, end = 0, n
	} else {
		start, end = n-1, -1
	}
	clamp := func(v star.Value, fallback int) (int, error) {
		if v == star.None {
			return fallback, nil
		}
		i, err := star.AsInt32(v)
		if err != nil {
			return 0, fmt.Errorf("invalid start index: %s", err)
		}
		if i < 0 {
			i += n
		}
		if s > 0 {
			return min(max(i, 0), n), nil
		}
		return min(max(i, -1), n-1), nil
	}
	var err error
	if start, err = clamp(lo, start); err != nil {
		return 0, 0, 0, err
	}
	if end, err = clamp(hi, end); err != nil {
		return 0, 0, 0, err
	}
	return start, end, s, nil
}

func mustInt(v star.Value) int {
	i, _ := star.AsInt32(v)
	return i
}

// methodBuiltin is x.name for the method names that build or compare
// (allocatingMethods): a method of a built-in type comes back measured,
// anything else as it is.
func methodBuiltin(_ *star.Thread, _ *star.Builtin, args star.Tuple, _ []star.Tuple) (star.Value, error) {
	x, name := args[0], string(args[1].(star.String))
	v, err := attr(x, name)
	if err != nil {
		return nil, err
	}
	return measuredMethod(x, name, v), nil
}

// callMethodBuiltin is x.name(args…) for those names: measured, then
// called, without a measured method made in between.
func callMethodBuiltin(thread *star.Thread, _ *star.Builtin, args star.Tuple, kwargs []star.Tuple) (star.Value, error) {
	x, name := args[0], string(args[1].(star.String))
	v, err := attr(x, name)
	if err != nil {
		return nil, err
	}
	rest := args[2:]
	if method, ok := v.(*star.Builtin); ok && method.Receiver() != nil {
		if measure := methodMeasures[name]; measure != nil {
			if err := measure(thread, x, rest, kwargs); err != nil {
				return nil, err
			}
			out, err := star.Call(thread, method, rest, kwargs)
			if err != nil {
				return nil, err
			}
			return out, checkResult(out)
		}
	}
	return star.Call(thread, v, rest, kwargs)
}

func measuredMethod(x star.Value, name string, v star.Value) star.Value {
	method, ok := v.(*star.Builtin)
	if !ok || method.Receiver() == nil {
		return v
	}
	measure := methodMeasures[name]
	if measure == nil {
		return v
	}
	return star.NewBuiltin(name, func(thread *star.Thread, _ *star.Builtin, args star.Tuple, kwargs []star.Tuple) (star.Value, error) {
		if err := measure(thread, x, args, kwargs); err != nil {
			return nil, err
		}
		out, err := star.Call(thread, method, args, kwargs)
		if err != nil {
			return nil, err
		}
		return out, checkResult(out)
	})
}

type methodMeasure func(thread *star.Thread, recv star.Value, args star.Tuple, kwargs []star.Tuple) error

var methodMeasures = map[string]methodMeasure{
	"join": func(thread *star.Thread, recv star.Value, args star.Tuple, _ []star.Tuple) error {
		sep, ok := recv.(star.String)
		if !ok || len(args) == 0 {
			return nil
		}
		iterable, ok := args[0].(star.Iterable)
		if !ok {
			return nil
		}
		var n, count int64
		iter := iterable.Iterate()
		defer iter.Done()
		var elem star.Value
		for iter.Next(&elem) {
			n += shallowBytes(elem)
			count++
		}
		return budgetOf(thread).charge(n+max(count-1, 0)*int64(len(sep)), "a string")
	},
	"split":      chargePieces,
	"rsplit":     chargePieces,
	"splitlines": chargePieces,
	"replace": func(thread *star.Thread, recv star.Value, args star.Tuple, _ []star.Tuple) error {
		s, ok := recv.(star.String)
		if !ok || len(args) < 2 {
			return nil
		}
		old, ok1 := args[0].(star.String)
		repl, ok2 := args[1].(star.String)
		if !ok1 || !ok2 {
			return nil
		}
		count := int64(strings.Count(string(s), string(old)))
		if len(args) > 2 {
			if limit, err := star.AsInt32(args[2]); err == nil && limit >= 0 {
				count = min(count, int64(limit))
			}
		}
		return budgetOf(thread).charge(int64(len(s))+count*(int64(len(repl))-int64(len(old))), "a string")
	},
	"format": func(thread *star.Thread, recv star.Value, args star.Tuple, kwargs []star.Tuple) error {
		s, ok := recv.(star.String)
		if !ok {
			return nil
		}
		values := slices.Clone(args)
		for _, kv := range kwargs {
			values = append(values, kv[1])
		}
		return chargeFormat(thread, string(s), strings.Count(string(s), "{"), values...)
	},
	"upper":      chargeCase,
	"lower":      chargeCase,
	"title":      chargeCase,
	"capitalize": chargeCase,
	"items": func(thread *star.Thread, recv star.Value, _ star.Tuple, _ []star.Tuple) error {
		return budgetOf(thread).charge(headerBytes+int64(star.Len(recv))*(slotBytes+headerBytes+2*slotBytes), "a list of pairs")
	},
	"keys":   chargeCopy,
	"values": chargeCopy,
	"extend": chargeArgument,
	"update": func(thread *star.Thread, recv star.Value, args star.Tuple, kwargs []star.Tuple) error {
		if len(args) > 0 {
			if err := checkKeys(args[0]); err != nil {
				return err
			}
		}
		return chargeArgument(thread, recv, args, kwargs)
	},
	"union":                chargeSetOperation,
	"intersection":         chargeSetOperation,
	"difference":           chargeSetOperation,
	"symmetric_difference": chargeSetOperation,
	"issubset":             chargeSetOperation,
	"issuperset":           chargeSetOperation,
	"index":                checkComparedArgument,
	"remove":               checkComparedArgument,
	"get":                  checkComparedArgument,
	"pop":                  checkComparedArgument,
	"setdefault":           checkComparedArgument,
	"add":                  checkComparedArgument,
	"discard":              checkComparedArgument,
	"popitem":              func(*star.Thread, star.Value, star.Tuple, []star.Tuple) error { return nil },
}

func chargePieces(thread *star.Thread, recv star.Value, args star.Tuple, _ []star.Tuple) error {
	s, ok := recv.(star.String)
	if !ok {
		return nil
	}
	var pieces int64
	if len(args) > 0 {
		if sep, ok := args[0].(star.String); ok && sep != "" {
			pieces = int64(strings.Count(string(s), string(sep))) + 1
		}
	}
	if pieces == 0 {
		fields, inField := int64(0), false
		for _, r := range string(s) {
			if unicode.IsSpace(r) {
				inField = false
				if r == '\n' {
					fields++
				}
			} else if !inField {
				inField = true
				fields++
			}
		}
		pieces = fields + 1
	}
	return budgetOf(thread).charge(headerBytes+pieces*2*slotBytes, "a list of strings")
}

func chargeCase(thread *star.Thread, recv star.Value, _ star.Tuple, _ []star.Tuple) error {
	return budgetOf(thread).charge(2*shallowBytes(recv), "a string")
}

func chargeCopy(thread *star.Thread, recv star.Value, _ star.Tuple, _ []star.Tuple) error {
	return budgetOf(thread).charge(headerBytes+int64(star.Len(recv))*slotBytes, "a list")
}

func chargeArgument(thread *star.Thread, _ star.Value, args star.Tuple, kwargs []star.Tuple) error {
	n := int64(len(kwargs))
	if len(args) > 0 {
		m, err := length(thread, args[0])
		if err != nil {
			return err
		}
		n += m
	}
	return budgetOf(thread).charge(n*entryBytes, "the elements added")
}

func chargeSetOperation(thread *star.Thread, recv star.Value, args star.Tuple, _ []star.Tuple) error {
	n := int64(star.Len(recv))
	for _, arg := range args {
		m, err := length(thread, arg)
		if err != nil {
			return err
		}
		n += m
		if err := checkElements(arg); err != nil {
			return err
		}
	}
	return budgetOf(thread).charge(headerBytes+n*entryBytes, "a set")
}

func checkComparedArgument(_ *star.Thread, _ star.Value, args star.Tuple, _ []star.Tuple) error {
	if len(args) == 0 {
		return nil
	}
	return checkParts(args[0])
}

// getattrBuiltin is getattr, whose methods come back measured as x.name's.
func getattrBuiltin(thread *star.Thread, b *star.Builtin, args star.Tuple, kwargs []star.Tuple) (star.Value, error) {
	out, err := star.Call(thread, star.Universe["getattr"], args, kwargs)
	if err != nil || len(args) < 2 {
		return out, err
	}
	name, _ := args[1].(star.String)
	return measuredMethod(args[0], string(name), out), nil
}

// sortedBuiltin is sorted, measured, and stopped at its run's deadline
// between comparisons.
func sortedBuiltin(thread *star.Thread, _ *star.Builtin, args star.Tuple, kwargs []star.Tuple) (star.Value, error) {
	var iterable star.Iterable
	var key star.Callable
	var reverse bool
	if err := star.UnpackArgs("sorted", args, kwargs, "iterable", &iterable, "key?", &key, "reverse?", &reverse); err != nil {
		return nil, err
	}
	n, err := length(thread, iterable)
	if err != nil {
		return nil, err
	}
	perElement := int64(slotBytes)
	if key != nil {
		perElement *= 2
	}
	if err := budgetOf(thread).charge(headerBytes+n*perElement, "a sorted list"); err != nil {
		return nil, err
	}
	var values []star.Value
	iter := iterable.Iterate()
	var x star.Value
	for iter.Next(&x) {
		values = append(values, x)
	}
	iter.Done()
	keys := values
	if key != nil {
		keys = make([]star.Value, len(values))
		for i, v := range values {
			k, err := star.Call(thread, key, star.Tuple{v}, nil)
			if err != nil {
				return nil, err
			}
			keys[i] = k
		}
	}
	if err := checkElements(star.Tuple(keys)); err != nil {
		return nil, err
	}
	order := make([]int, len(values))
	for i := range order {
		order[i] = i
	}
	var failed error
	compared := 0
	func() {
		defer func() {
			if r := recover(); r != nil && r != errSortStopped {
				panic(r)
			}
		}()
		slices.SortStableFunc(order, func(a, b int) int {
			if compared++; compared%1024 == 0 {
				if err := stoppedIn(thread); err != nil {
					failed = err
					panic(errSortStopped)
				}
			}
			if reverse {
				a, b = b, a
			}
			less, err := star.Compare(syntax.LT, keys[a], keys[b])
			if err != nil {
				failed = err
				panic(errSortStopped)
			}
			if less {
				return -1
			}
			if greater, _ := star.Compare(syntax.LT, keys[b], keys[a]); greater {
				return 1
			}
			return 0
		})
	}()
	if failed != nil {
		return nil, failed
	}
	sorted := make([]star.Value, len(values))
	for i, at := range order {
		sorted[i] = values[at]
	}
	return star.NewList(sorted), nil
}

var errSortStopped = fmt.Errorf("sort stopped")

// guardedJSON is the json module with encode, decode and indent measured.
var guardedJSON = func() *starlarkstruct.Module {
	members := star.StringDict{}
	for name, v := range starjson.Module.Members {
		original := v.(*star.Builtin)
		switch name {
		case "encode":
			members[name] = wrap("json."+name, original, func(thread *star.Thread, args star.Tuple, _ []star.Tuple) error {
				if err := chargeText(thread, "JSON text", args...); err != nil {
					return err
				}
				return checkParts(args...)
			})
		case "decode":
			members[name] = wrap("json."+name, original, chargeDecoded)
		case "indent":
			members[name] = wrap("json."+name, original, chargeIndented)
		default:
			members[name] = original
		}
	}
	return &starlarkstruct.Module{Name: "json", Members: members}
}()

// chargeDecoded charges what decoding a JSON text may build: a container
// or value for each of its structural characters.
func chargeDecoded(thread *star.Thread, args star.Tuple, _ []star.Tuple) error {
	if len(args) == 0 {
		return nil
	}
	s, ok := args[0].(star.String)
	if !ok {
		return nil
	}
	var structural int64
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[', '{', ',', ':':
			structural++
		}
	}
	return budgetOf(thread).charge(int64(len(s))+(structural+1)*entryBytes, "decoded JSON")
}

// chargeIndented charges the indented text: each line the text breaks
// into carries the prefix and the indent of its depth.
func chargeIndented(thread *star.Thread, args star.Tuple, kwargs []star.Tuple) error {
	var s string
	prefix, indent := "", "\t"
	if err := star.UnpackArgs("indent", args, kwargs, "str", &s, "prefix?", &prefix, "indent?", &indent); err != nil {
		return nil // the original says what is wrong
	}
	var n, depth int64
	inString, escaped := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inString:
			if escaped {
				escaped = false
			} else if c == '\\' {
				escaped = true
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			n = capped(n, 1+int64(len(prefix))+depth*int64(len(indent)), 1<<62)
		case c == ']' || c == '}':
			depth--
			n = capped(n, 1+int64(len(prefix))+max(depth, 0)*int64(len(indent)), 1<<62)
		case c == ',':
			n = capped(n, 1+int64(len(prefix))+depth*int64(len(indent)), 1<<62)
		}
	}
	return budgetOf(thread).charge(int64(len(s))*2+n, "indented JSON")
}
