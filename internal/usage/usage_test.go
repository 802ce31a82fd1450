package usage

import (
	"errors"
	"fmt"
	"testing"
)

func TestIs(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{Errorf("--a and --b exclude each other"), true},
		{fmt.Errorf("running branch: %w", Error{Err: errors.New("bad flag")}), true},
		{errors.New(`unknown command "lst" for "isx"`), true},
		{errors.New(`required flag(s) "from" not set`), true},
		{errors.New("accepts 1 arg(s), received 2"), true},
		{errors.New("unknown flag: --nope"), true},
		{errors.New("the Incus daemon is not running"), false},
		{fmt.Errorf("wrapped: %w", errors.New("unknown command")), false},
	} {
		if got := Is(c.err); got != c.want {
			t.Errorf("Is(%q) = %v, want %v", c.err, got, c.want)
		}
	}
}
