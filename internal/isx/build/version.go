package build

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is this isx's version, stamped on every template it builds. A
// release sets it with
//
//	go build -ldflags "-X github.com/incusspawn/isx/internal/isx/build.Version=1.2.3" ./cmd/isx
var Version = "0.1.0-dev"

// semver is a version as MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]; missing
// minor and patch parts read as 0 and a leading "v" is ignored.
type semver struct {
	core       [3]int
	prerelease []string
}

func parseVersion(s string) (semver, error) {
	var v semver
	text := strings.TrimPrefix(strings.TrimSpace(s), "v")
	text, _, _ = strings.Cut(text, "+")
	core, pre, hasPre := strings.Cut(text, "-")
	parts := strings.Split(core, ".")
	if core == "" || len(parts) > 3 {
		return v, fmt.Errorf("%q is not a version like 1.2.3", s)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return v, fmt.Errorf("%q is not a version like 1.2.3", s)
		}
		v.core[i] = n
	}
	if hasPre {
		v.prerelease = strings.Split(pre, ".")
	}
	return v, nil
}

// compareVersions orders versions as semantic versioning does: a
// prerelease (1.0.0-dev) comes before its release (1.0.0).
func compareVersions(a, b semver) int {
	for i := range a.core {
		if a.core[i] != b.core[i] {
			return cmpInt(a.core[i], b.core[i])
		}
	}
	switch {
	case len(a.prerelease) == 0 && len(b.prerelease) == 0:
		return 0
	case len(a.prerelease) == 0:
		return 1
	case len(b.prerelease) == 0:
		return -1
	}
	for i := 0; i < len(a.prerelease) && i < len(b.prerelease); i++ {
		if c := comparePrerelease(a.prerelease[i], b.prerelease[i]); c != 0 {
			return c
		}
	}
	return cmpInt(len(a.prerelease), len(b.prerelease))
}

func comparePrerelease(a, b string) int {
	x, errA := strconv.Atoi(a)
	y, errB := strconv.Atoi(b)
	switch {
	case errA == nil && errB == nil:
		return cmpInt(x, y)
	case errA == nil:
		return -1 // numeric identifiers come first
	case errB == nil:
		return 1
	}
	return strings.Compare(a, b)
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// OlderVersion reports whether version stamped is older than running. An
// unparsable stamped version counts as older (it cannot be trusted to be
// current); an unparsable running version is an error.
func OlderVersion(stamped, running string) (bool, error) {
	current, err := parseVersion(running)
	if err != nil {
		return false, fmt.Errorf("this isx's own version: %w", err)
	}
	old, err := parseVersion(stamped)
	if err != nil {
		return true, nil
	}
	return compareVersions(old, current) < 0, nil
}
