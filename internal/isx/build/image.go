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

// CheckImage says whether the root image of name's chain can be had: its
// alias is in the project, or its tarball can be read (an error saying
// which project lacks it and how to give it one, otherwise).
func (b *Builder) CheckImage(ctx context.Context, name string) error {
	chain, err := b.Set.Chain(name)
	if err != nil {
		return err
	}
	return b.checkImage(ctx, chain[0])
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
		return b.missingImage(ctx, root)
	}
	return err
}

// missingImage says which project lacks the root image and the command
// that gives it one: a copy from the default project when that has it (a
// project with features.images=true keeps images of its own), else an
// import.
func (b *Builder) missingImage(ctx context.Context, root *template.Definition) error {
	project := b.projectName()
	err := failure(CodeImageNotFound, root.Name, nil, "builds on image %q, which Incus does not have in project %s", root.Image, project)
	if project != "default" {
		if _, defaultErr := b.Client.InProject("default").GetImageAlias(ctx, root.Image); defaultErr == nil {
			err.Hint = fmt.Sprintf("project %s keeps images of its own (features.images=true) and project default has %s; copy it with `incus image copy %s local: --alias %s --target-project %s --mode relay`",
				project, root.Image, root.Image, root.Image, project)
			return err
		}
	}
	err.Hint = fmt.Sprintf("import it with `incus image import TARBALL --alias %s --project %s` (`incus image list --project %s` shows the images there are; in isx's source, scripts/images.sh builds and imports isx/busybox and isx/debian-12)",
		root.Image, project, project)
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
	b.line("    importing image %s as %s", root.ImageFile, alias)
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
