package task

import (
	"path"
	"strings"
	"unicode/utf8"

	"github.com/incusspawn/isx/internal/coded"
)

// MaxEnvVars is how many environment variables one task may set.
const MaxEnvVars = 128

// CheckCwd refuses a working directory a task cannot start in: a relative
// path, a NUL byte, or one longer than Linux accepts.
func CheckCwd(cwd string) error {
	if cwd != "" && (!path.IsAbs(cwd) || strings.ContainsRune(cwd, 0) || len(cwd) > 4096) {
		return coded.New(CodeInvalidArgument, "cwd %q must be an absolute path inside the instance", Clip(cwd, 80))
	}
	return nil
}

// CheckEnv refuses environment variables the task's runner could not
// pass on faithfully: too many, a name a shell cannot export, or a NUL.
func CheckEnv(env map[string]string) error {
	if len(env) > MaxEnvVars {
		return coded.New(CodeInvalidArgument, "env has %d variables; at most %d are accepted", len(env), MaxEnvVars)
	}
	for name, value := range env {
		if !envNamePattern.MatchString(name) {
			return coded.New(CodeInvalidArgument, "env name %q is not allowed: use letters, digits and '_', not starting with a digit", Clip(name, 40))
		}
		if strings.ContainsRune(value, 0) {
			return coded.New(CodeInvalidArgument, "the value of env %s holds a NUL byte", name)
		}
	}
	return nil
}

// Clip cuts s to at most n bytes on a character boundary, marking the cut
// with an ellipsis: for outside text quoted in a message.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
