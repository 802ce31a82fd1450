// Package sourcetree finds this module's source tree, for tests that run its
// scripts or build its binaries.
package sourcetree

import (
	"errors"
	"os"
	"path/filepath"
)

// Root is the directory holding go.mod, found from the working directory
// upwards (go test runs in the package's directory).
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod found above the working directory")
		}
		dir = parent
	}
}
