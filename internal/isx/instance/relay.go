package instance

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// RelayEnv names the relay program on the host, for a test binary or an
// install that keeps it apart from isx; by default it is isx-relay next
// to the running isx.
const RelayEnv = "ISX_RELAY"

// RelayName is the relay program's file name, next to isx and in the
// proxy's directory.
const RelayName = "isx-relay"

// RelaySource is the relay program this isx installs.
func RelaySource() (string, error) {
	if path := os.Getenv(RelayEnv); path != "" {
		return path, nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding the isx program, next to which %s is: %w", RelayName, err)
	}
	if resolved, err := filepath.EvalSymlinks(self); err == nil {
		self = resolved
	}
	return filepath.Join(filepath.Dir(self), RelayName), nil
}

// installed remembers, per destination, the source version last
// installed there, so that a branch pays for the comparison once.
var installed sync.Map

type relayVersion struct {
	source string
	size   int64
	mtime  int64
}

// InstallRelay puts the relay in the proxy's directory, where instances'
// RelayDevice leads, unless the same is there: instances keep reaching
// the proxy when the isx that made them is moved or rebuilt. The copy is
// renamed into place, so a running instance keeps the one it has.
func InstallRelay(proxyDir string) (string, error) {
	destination := filepath.Join(proxyDir, RelayName)
	source, err := RelaySource()
	if err != nil {
		return "", err
	}
	info, err := os.Stat(source)
	if err != nil {
		return "", fmt.Errorf("%s, which instances run to reach the host proxy, is not at %s (install it beside isx: go install ./cmd/%s, or name it in %s): %w",
			RelayName, source, RelayName, RelayEnv, err)
	}
	version := relayVersion{source: source, size: info.Size(), mtime: info.ModTime().UnixNano()}
	if seen, ok := installed.Load(destination); ok && seen == version {
		if _, err := os.Stat(destination); err == nil {
			return destination, nil
		}
	}
	program, err := os.ReadFile(source)
	if err != nil {
		return "", err
	}
	if err := static(program); err != nil {
		return "", fmt.Errorf("%s: %w", source, err)
	}
	if !sameContent(destination, program) {
		if err := replace(destination, program); err != nil {
			return "", err
		}
	}
	installed.Store(destination, version)
	return destination, nil
}

// static refuses a program that needs a dynamic loader, which an image
// (busybox) may not have.
func static(program []byte) error {
	file, err := elf.NewFile(bytes.NewReader(program))
	if err != nil {
		return fmt.Errorf("not a program the instance can run: %w", err)
	}
	defer file.Close()
	for _, p := range file.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("linked dynamically, so it would not run in every image; build it with CGO_ENABLED=0")
		}
	}
	return nil
}

func sameContent(path string, program []byte) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sum := sha256.New()
	if _, err := io.Copy(sum, f); err != nil {
		return false
	}
	want := sha256.Sum256(program)
	return bytes.Equal(sum.Sum(nil), want[:])
}

func replace(path string, program []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+RelayName+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(program); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o755); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
