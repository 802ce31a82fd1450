package starlark

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"

	star "go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"github.com/incusspawn/isx/internal/coded"
)

// The memory a run may take. Starlark allocates without asking anyone, so a
// program is rewritten before it is compiled (rewrite.go): every operation
// that can build a value larger than its operands (concatenation,
// repetition, formatting, slicing, the builtins that make lists, strings
// and dicts) goes through a builtin that works out the size of what it
// would build and charges it to the run's budget first. What is charged is
// what the run allocates in all, not what it holds at the end: the budget
// bounds the memory a program can take at any moment, whatever it keeps,
// and a run that goes over it stops before the allocation. Operations left
// alone build values no larger than a small constant per step (an int plus
// a literal, an element appended), which the step limit bounds.

// DefaultMaxAllocBytes is a run's allocation budget when Limits leaves it
// zero.
const DefaultMaxAllocBytes = 64 << 20

// maxIntBits bounds an integer a script makes: arithmetic on larger ones,
// and their conversion to text, take time no deadline can interrupt.
const maxIntBits = 1024

// maxExpanded bounds the nodes of a value as a comparison, a hash or a
// rendering walks it, shared parts counted at every place they appear: a
// list holding one list twice, 30 times over, is small in memory and a
// billion nodes to compare.
const maxExpanded = 1 << 20

// Sizes of what Starlark allocates, as this package counts them: a
// reference to a value, and the fixed part of each container.
const (
	slotBytes   = 16
	headerBytes = 48
	entryBytes  = 64
)

// budget is what one run and the runs beneath it (a program's Starlark
// tools) may allocate together.
type budget struct {
	max  int64
	used atomic.Int64
}

func newBudget(max int64) *budget {
	if max <= 0 {
		max = DefaultMaxAllocBytes
	}
	return &budget{max: max}
}

// collect asks for a collection once a run that allocated a good part of
// its budget has ended: what it built is garbage now, and the collector
// would otherwise let it stand until the heap doubled, so that the
// process's memory follows the runs going on rather than those that ran.
func (b *budget) collect() {
	if b.used.Load() >= b.max/4 {
		runtime.GC()
	}
}

// charge takes n bytes from the budget for what, or refuses.
func (b *budget) charge(n int64, what string) error {
	if n <= 0 || b == nil {
		return nil
	}
	if used := b.used.Add(n); used > b.max {
		b.used.Add(-n)
		return memoryExceeded(b.max, n, what)
	}
	return nil
}

func memoryExceeded(max, n int64, what string) *Error {
	return &Error{Base: coded.Base{
		Code: CodeLimitExceeded,
		Message: fmt.Sprintf("the script would allocate more than %s, its memory limit, by building %s of %s",
			bytesText(max), what, bytesText(n)),
		Hint: "What a script builds counts in full each time, also a copy it drops: build a long string by collecting its parts in a list and joining them once (\"\".join(parts)), grow a list with append rather than +, ask the tools for less, or split the work across several calls.",
	}}
}

func bytesText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

func tooLarge(what string, limit int) *Error {
	return &Error{Base: coded.Base{
		Code:    CodeLimitExceeded,
		Message: fmt.Sprintf("%s is larger than a script may use (%d)", what, limit),
		Hint:    "Work on smaller values; a script's integers have at most 1,024 bits, and a value it compares, hashes or prints at most 1,048,576 parts, shared parts counted where they appear.",
	}}
}

// budgetOf is the budget of the run a thread belongs to.
func budgetOf(thread *star.Thread) *budget {
	if r := runOf(thread); r != nil {
		return r.budget
	}
	return nil
}

// stoppedIn reports a thread's run whose context ended, for builtins that
// loop long enough to check.
func stoppedIn(thread *star.Thread) error {
	if r := runOf(thread); r != nil && r.ctx.Err() != nil {
		return stopped(r.ctx, "the script was stopped: "+context.Cause(r.ctx).Error())
	}
	return nil
}

// shallowBytes is what a container's own storage takes: what a copy of it
// allocates.
func shallowBytes(v star.Value) int64 {
	switch v := v.(type) {
	case star.String:
		return int64(len(v))
	case star.Bytes:
		return int64(len(v))
	case *star.List:
		return headerBytes + int64(v.Len())*slotBytes
	case star.Tuple:
		return headerBytes + int64(len(v))*slotBytes
	case *star.Dict:
		return headerBytes + int64(v.Len())*entryBytes
	case *star.Set:
		return headerBytes + int64(v.Len())*entryBytes
	case star.Int:
		return intBytes(v)
	}
	return 0 // a number, a bool, None: a step's worth, which the step limit bounds
}

func intBytes(i star.Int) int64 {
	if _, ok := i.Int64(); ok {
		return 0
	}
	return int64(i.BigInt().BitLen()/8) + slotBytes
}

func checkInt(v star.Value) error {
	if i, ok := v.(star.Int); ok {
		if _, small := i.Int64(); !small && i.BigInt().BitLen() > maxIntBits {
			return tooLarge("an integer of "+fmt.Sprint(i.BigInt().BitLen())+" bits", maxIntBits)
		}
	}
	return nil
}

func mutable(v star.Value) bool {
	switch v.(type) {
	case *star.List, *star.Dict, *star.Set:
		return true
	}
	return false
}

// identity is what a walk knows a shared container by.
type identity struct {
	p unsafe.Pointer
	n int
}

func identityOf(v star.Value) (identity, bool) {
	switch v := v.(type) {
	case *star.List:
		return identity{p: unsafe.Pointer(v)}, true
	case *star.Dict:
		return identity{p: unsafe.Pointer(v)}, true
	case *star.Set:
		return identity{p: unsafe.Pointer(v)}, true
	case *starlarkstruct.Struct:
		return identity{p: unsafe.Pointer(v)}, true
	case star.Tuple:
		if len(v) == 0 {
			return identity{}, false
		}
		return identity{p: unsafe.Pointer(unsafe.SliceData(v)), n: len(v)}, true
	}
	return identity{}, false
}

// walk measures a value: rendered, the bytes its text takes (str, repr,
// JSON); expanded, the parts a comparison or hash visits. Each container is
// measured once, and its measure reused wherever it is shared; one met
// again inside itself counts as the few bytes Starlark prints for it.
// Both stop growing past limit.
type walk struct {
	limit int64
	// quick counts a string as its length, without its escapes, and
	// takes a list, dict or set as one part: what a hash walks, and an
	// error naming a key shows, is a tuple of hashable values, never a
	// mutable container (a hash refuses those), so a check made wherever
	// a tuple is made looks no further.
	quick    bool
	rendered map[identity]int64
	expanded map[identity]int64
	open     map[identity]bool
}

func newWalk(limit int64) *walk { return &walk{limit: limit} }

// begin makes the walk's maps at its first container, so that measuring
// a number or a string allocates nothing.
func (w *walk) begin() {
	if w.open == nil {
		w.rendered, w.expanded, w.open = map[identity]int64{}, map[identity]int64{}, map[identity]bool{}
	}
}

func capped(a, b, limit int64) int64 {
	if a+b > limit || a+b < 0 {
		return limit + 1
	}
	return a + b
}

// text is how many bytes v's text takes.
func (w *walk) text(v star.Value) int64 {
	switch v := v.(type) {
	case star.String:
		if w.quick {
			return int64(len(v)) + 2
		}
		return quotedBytes(string(v))
	case star.Bytes:
		return 4 * int64(len(v))
	case star.Int:
		if _, ok := v.Int64(); ok {
			return 20
		}
		return int64(v.BigInt().BitLen())*30/100 + 2
	case star.Float:
		return 32
	case star.NoneType, star.Bool:
		return 5
	}
	id, shared := identityOf(v)
	if !shared || w.quick && mutable(v) {
		return int64(len(v.Type())) + 32
	}
	w.begin()
	if n, ok := w.rendered[id]; ok {
		return n
	}
	if w.open[id] {
		return 5 // [...]
	}
	w.open[id] = true
	n := int64(16)
	add := func(part star.Value) bool {
		n = capped(n, w.text(part)+2, w.limit)
		return n <= w.limit
	}
	switch v := v.(type) {
	case *star.List:
		for i := 0; i < v.Len() && add(v.Index(i)); i++ {
		}
	case star.Tuple:
		for i := 0; i < len(v) && add(v[i]); i++ {
		}
	case *star.Dict:
		for _, item := range v.Items() {
			if !add(item[0]) || !add(item[1]) {
				break
			}
		}
	case *star.Set:
		iter := v.Iterate()
		var elem star.Value
		for iter.Next(&elem) && add(elem) {
		}
		iter.Done()
	case *starlarkstruct.Struct:
		for _, name := range v.AttrNames() {
			field, _ := v.Attr(name)
			n = capped(n, int64(len(name))+3, w.limit)
			if !add(field) {
				break
			}
		}
	}
	delete(w.open, id)
	w.rendered[id] = n
	return n
}

// quotedBytes is the length of s quoted, with the escapes Starlark's and
// JSON's quoting may use.
func quotedBytes(s string) int64 {
	n := int64(len(s)) + 2
	valid := utf8.ValidString(s)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c < 0x20 || c == 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&':
			n += 5
		case c >= 0x80 && !valid:
			n += 3
		}
	}
	return n
}

// parts is how many parts a comparison or hash of v visits.
func (w *walk) parts(v star.Value) int64 {
	id, shared := identityOf(v)
	if !shared || w.quick && mutable(v) {
		return 1
	}
	w.begin()
	if n, ok := w.expanded[id]; ok {
		return n
	}
	if w.open[id] {
		return 1
	}
	w.open[id] = true
	n := int64(1)
	add := func(part star.Value) bool {
		n = capped(n, w.parts(part), w.limit)
		return n <= w.limit
	}
	switch v := v.(type) {
	case *star.List:
		for i := 0; i < v.Len() && add(v.Index(i)); i++ {
		}
	case star.Tuple:
		for i := 0; i < len(v) && add(v[i]); i++ {
		}
	case *star.Dict:
		for _, item := range v.Items() {
			if !add(item[0]) || !add(item[1]) {
				break
			}
		}
	case *star.Set:
		iter := v.Iterate()
		var elem star.Value
		for iter.Next(&elem) && add(elem) {
		}
		iter.Done()
	case *starlarkstruct.Struct:
		for _, name := range v.AttrNames() {
			field, _ := v.Attr(name)
			if !add(field) {
				break
			}
		}
	}
	delete(w.open, id)
	w.expanded[id] = n
	return n
}

// maxHashableText bounds the text of a tuple or struct: Starlark names a
// missing dict key in full, so a key's text must be one a message can
// hold. A few times the default budget leaves room for any tuple of
// values a run could have made.
const maxHashableText = 4 * DefaultMaxAllocBytes

// checkHashable refuses a tuple or struct that a hash would walk too long,
// or whose text (which an error naming it holds) is too large.
func checkHashable(v star.Value) error {
	w := newWalk(maxExpanded)
	w.quick = true
	if w.parts(v) > maxExpanded {
		return tooLarge("a "+v.Type()+", counted part by part,", maxExpanded)
	}
	w.limit = maxHashableText
	if w.text(v) > maxHashableText {
		return tooLarge("a "+v.Type()+"'s text, in bytes,", maxHashableText)
	}
	return nil
}

// chargeText charges what rendering values as text allocates.
func chargeText(thread *star.Thread, what string, values ...star.Value) error {
	b := budgetOf(thread)
	if b == nil {
		return nil
	}
	w := newWalk(b.max)
	var n int64
	for _, v := range values {
		n = capped(n, w.text(v), b.max)
	}
	return b.charge(n, what)
}

// checkParts refuses values a comparison or hash would walk for too long.
func checkParts(values ...star.Value) error {
	containers := false
	for _, v := range values {
		if _, shared := identityOf(v); shared {
			containers = true
		}
	}
	if !containers {
		return nil
	}
	w := newWalk(maxExpanded)
	for _, v := range values {
		if w.parts(v) > maxExpanded {
			return tooLarge("a value compared or hashed", maxExpanded)
		}
	}
	return nil
}
