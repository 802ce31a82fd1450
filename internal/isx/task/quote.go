package task

import (
	"sort"
	"strings"
)

// shellQuote makes s one word for a POSIX shell, whatever it holds: inside
// single quotes nothing is special, and a single quote itself is closed,
// escaped and reopened. NUL cannot be passed to a shell at all; callers
// refuse it before quoting.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// commandFile is what a run sources to start the command: it enters the
// working directory and replaces the sourcing subshell with argv.
func commandFile(cwd string, argv []string) string {
	var b strings.Builder
	b.WriteString("cd ")
	b.WriteString(shellQuote(cwd))
	b.WriteString(" || exit 1\nexec")
	for _, arg := range argv {
		b.WriteByte(' ')
		b.WriteString(shellQuote(arg))
	}
	b.WriteByte('\n')
	return b.String()
}

// envFile is what a run sources to set the task's environment. Names are
// validated before; values are quoted, so any value (newlines, $(...),
// quotes) arrives unchanged.
func envFile(env map[string]string) string {
	names := make([]string, 0, len(env))
	for name := range env {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		b.WriteString("export ")
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(shellQuote(env[name]))
		b.WriteByte('\n')
	}
	return b.String()
}
