package auth

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// KeyStore keeps the local issuer's private signing key (a JWK). The storage
// package implements it over the database; FileKeyStore keeps it in a file.
type KeyStore interface {
	// LoadSigningKey returns the stored key, or ok false when there is none.
	LoadSigningKey(ctx context.Context) (jwkJSON []byte, ok bool, err error)
	// SaveSigningKey stores jwkJSON unless a key is already stored, and
	// returns whichever key is stored now, so that two processes starting at
	// once end up signing with the same key.
	SaveSigningKey(ctx context.Context, jwkJSON []byte) (stored []byte, err error)
}

// SigningKeyFile is the name of FileKeyStore's key file.
const SigningKeyFile = "signing-key.jwk"

// FileKeyStore keeps the key in dir/signing-key.jwk, readable by the owner
// only (0600), e.g. in the SQLite data directory. dir is created (0700) on
// the first save.
func FileKeyStore(dir string) KeyStore {
	return fileKeyStore{dir: dir}
}

type fileKeyStore struct{ dir string }

func (s fileKeyStore) path() string { return filepath.Join(s.dir, SigningKeyFile) }

func (s fileKeyStore) LoadSigningKey(ctx context.Context) ([]byte, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	info, err := os.Stat(s.path())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("auth: read signing key: %w", err)
	}
	// A private key others can read is as good as published: refuse it
	// rather than sign with it.
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, false, fmt.Errorf("auth: signing key %s is readable by others (mode %04o); run chmod 600 on it or delete it to make a new one", s.path(), perm)
	}
	data, err := os.ReadFile(s.path())
	if err != nil {
		return nil, false, fmt.Errorf("auth: read signing key: %w", err)
	}
	return data, true, nil
}

// SaveSigningKey writes a temporary file and hard-links it into place: the
// link fails if the key file exists, which makes "save if absent" atomic
// across processes, and readers never see a half-written key.
func (s fileKeyStore) SaveSigningKey(ctx context.Context, jwkJSON []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("auth: create key directory: %w", err)
	}
	temporary, err := writeTemporary(s.dir, jwkJSON)
	if err != nil {
		return nil, err
	}
	// Once linked, the key file keeps the data; the temporary name is only
	// litter, and failing to remove it changes nothing about the key.
	defer func() { _ = os.Remove(temporary) }()
	err = os.Link(temporary, s.path())
	if err == nil {
		return jwkJSON, nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("auth: store signing key: %w", err)
	}
	stored, ok, err := s.LoadSigningKey(ctx)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("auth: signing key %s vanished while being stored; start again", s.path())
	}
	return stored, nil
}

func writeTemporary(dir string, data []byte) (string, error) {
	file, err := os.CreateTemp(dir, ".signing-key-*.tmp") // mode 0600
	if err != nil {
		return "", fmt.Errorf("auth: store signing key: %w", err)
	}
	name := file.Name()
	_, err = file.Write(data)
	if err == nil {
		err = file.Sync()
	}
	if closeErr := file.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		_ = os.Remove(name)
		return "", fmt.Errorf("auth: store signing key: %w", err)
	}
	return name, nil
}
