package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/template"
)

// LocalAliasPrefix starts the alias a local image tarball is imported
// under, followed by the first 12 hex digits of its sha256.
const LocalAliasPrefix = "isx-local/"

// LocalAlias is the alias of the tarball with this sha256.
func LocalAlias(digest string) string { return LocalAliasPrefix + digest[:12] }

// DefinitionHash is the hash stamped on a template built from name: the
// hash of its definition chain, and, when the chain's root image is a
// local tarball, of that tarball's content too (the definition names only
// its path, and a new tarball at the same path must make the template
// stale).
func DefinitionHash(set *template.Set, name string) (string, error) {
	chain, err := set.Chain(name)
	if err != nil {
		return "", err
	}
	chainHash, err := set.ChainHash(name)
	if err != nil {
		return "", err
	}
	root := chain[0]
	if root.ImageFile == "" {
		return chainHash, nil
	}
	digest, err := tarballDigest(root.ImageFile)
	if err != nil {
		return "", failure(CodeImageUnreadable, root.Name, err, "the image tarball %s cannot be read", root.ImageFile)
	}
	h := sha256.New()
	fmt.Fprintf(h, "isx.build/v1\nchain:%s\nimage:%s\n", chainHash, digest)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// digestKey identifies a tarball's content well enough to reuse its hash
// within one process: hashing a large image on every `isx list` would be
// slow.
type digestKey struct {
	path  string
	size  int64
	mtime time.Time
}

var digests sync.Map // digestKey → string

func tarballDigest(path string) (string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !info.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	key := digestKey{path: path, size: info.Size(), mtime: info.ModTime()}
	if d, ok := digests.Load(key); ok {
		return d.(string), nil
	}
	file, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer file.Close()
	h := sha256.New()
	if _, err := io.Copy(h, file); err != nil {
		return "", err
	}
	digest := hex.EncodeToString(h.Sum(nil))
	digests.Store(key, digest)
	return digest, nil
}

// checkImage makes sure the root image of a chain can be had, before
// anything is created: the alias exists, or the tarball can be read.
func (b *Builder) checkImage(ctx context.Context, root *template.Definition) error {
	if root.ImageFile != "" {
		if _, err := tarballDigest(root.ImageFile); err != nil {
			return failure(CodeImageUnreadable, root.Name, err, "the image tarball %s cannot be read (give a unified image tarball with metadata.yaml and rootfs/)", root.ImageFile)
		}
		return nil
	}
	_, err := b.Client.GetImageAlias(ctx, root.Image)
	if errors.Is(err, incus.ErrNotFound) {
		return failure(CodeImageNotFound, root.Name, nil, "builds on image alias %q, which Incus does not have; `incus image list` shows the aliases there are, and scripts/images.sh imports isx/busybox and isx/debian-12", root.Image)
	}
	return err
}

// imageAlias is the alias to launch a chain's root from, importing a
// local tarball first when Incus does not have it yet.
func (b *Builder) imageAlias(ctx context.Context, root *template.Definition) (string, error) {
	if root.ImageFile == "" {
		return root.Image, nil
	}
	digest, err := tarballDigest(root.ImageFile)
	if err != nil {
		return "", failure(CodeImageUnreadable, root.Name, err, "cannot read the image tarball %s", root.ImageFile)
	}
	alias := LocalAlias(digest)
	existing, err := b.Client.GetImageAlias(ctx, alias)
	switch {
	case err == nil && existing.Target == digest:
		return alias, nil
	case err == nil:
		// The alias names another image (a 12-digit prefix collision or a
		// hand-made alias): point it at this tarball's image.
		if err := b.Client.DeleteImageAlias(ctx, alias); err != nil && !errors.Is(err, incus.ErrNotFound) {
			return "", err
		}
	case !errors.Is(err, incus.ErrNotFound):
		return "", err
	}
	b.progress("    importing image %s as %s\n", root.ImageFile, alias)
	fingerprint, err := b.Client.ImportImage(ctx, root.ImageFile)
	if err != nil {
		return "", failure(CodeImageUnreadable, root.Name, err, "Incus could not import %s (is it a unified image tarball with metadata.yaml and rootfs/?)", root.ImageFile)
	}
	err = b.Client.CreateImageAlias(ctx, alias, fingerprint, "isx: "+root.ImageFile)
	if err != nil && !errors.Is(err, incus.ErrConflict) {
		return "", err
	}
	return alias, nil
}
