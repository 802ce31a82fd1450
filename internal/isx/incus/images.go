package incus

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"
)

// Image is an image in the daemon's image store.
type Image struct {
	Fingerprint  string            `json:"fingerprint"`
	Filename     string            `json:"filename"`
	Size         int64             `json:"size"`
	Architecture string            `json:"architecture"`
	Type         string            `json:"type"`
	Public       bool              `json:"public"`
	Properties   map[string]string `json:"properties"`
	Aliases      []ImageAlias      `json:"aliases"`
	CreatedAt    time.Time         `json:"created_at"`
	UploadedAt   time.Time         `json:"uploaded_at"`
}

// ImageAlias names an image.
type ImageAlias struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Target      string `json:"target"` // the image's fingerprint
	Type        string `json:"type"`
}

// ImportImage imports a unified image tarball (metadata.yaml and rootfs/,
// optionally compressed) from the host's disk and returns its fingerprint.
// An image with the same fingerprint that is already there is kept and its
// fingerprint returned, so importing is idempotent.
func (c *Client) ImportImage(ctx context.Context, tarball string) (string, error) {
	fingerprint, size, err := fileSHA256(tarball)
	if err != nil {
		return "", fmt.Errorf("importing image %s: %w", tarball, err)
	}
	if _, err := c.GetImage(ctx, fingerprint); err == nil {
		return fingerprint, nil
	} else if !errors.Is(err, ErrNotFound) {
		return "", fmt.Errorf("importing image %s: %w", tarball, err)
	}
	file, err := os.Open(tarball)
	if err != nil {
		return "", fmt.Errorf("importing image: %w", err)
	}
	defer file.Close()
	header := http.Header{}
	header.Set("Content-Type", "application/octet-stream")
	header.Set("X-Incus-public", "0")
	r := request{method: "POST", path: apiPath("images"), body: file, header: header, size: size}
	op, err := c.run(ctx, r)
	if err != nil {
		return "", fmt.Errorf("importing image %s: %w", tarball, err)
	}
	var meta struct {
		Fingerprint string `json:"fingerprint"`
	}
	if op != nil && len(op.Metadata) > 0 {
		if err := json.Unmarshal(op.Metadata, &meta); err != nil {
			return "", fmt.Errorf("importing image %s: decoding the result: %w", tarball, err)
		}
	}
	if meta.Fingerprint != "" {
		fingerprint = meta.Fingerprint
	}
	return fingerprint, nil
}

// fileSHA256 is the fingerprint Incus gives a unified tarball.
func fileSHA256(name string) (string, int64, error) {
	file, err := os.Open(name)
	if err != nil {
		return "", 0, err
	}
	defer file.Close()
	hash := sha256.New()
	size, err := io.Copy(hash, file)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(hash.Sum(nil)), size, nil
}

// Images lists the images the project sees.
func (c *Client) Images(ctx context.Context) ([]Image, error) {
	var images []Image
	r := request{method: "GET", path: apiPath("images"), query: url.Values{"recursion": {"1"}}}
	if _, err := c.get(ctx, r, &images); err != nil {
		return nil, fmt.Errorf("listing images: %w", err)
	}
	return images, nil
}

// GetImage returns the image with this fingerprint.
func (c *Client) GetImage(ctx context.Context, fingerprint string) (*Image, error) {
	var image Image
	if _, err := c.get(ctx, request{method: "GET", path: apiPath("images", fingerprint)}, &image); err != nil {
		return nil, fmt.Errorf("getting image %s: %w", fingerprint, err)
	}
	return &image, nil
}

// DeleteImage deletes an image and its aliases.
func (c *Client) DeleteImage(ctx context.Context, fingerprint string) error {
	if _, err := c.run(ctx, request{method: "DELETE", path: apiPath("images", fingerprint)}); err != nil {
		return fmt.Errorf("deleting image %s: %w", fingerprint, err)
	}
	return nil
}

// GetImageAlias returns the alias; a missing alias is ErrNotFound.
func (c *Client) GetImageAlias(ctx context.Context, name string) (*ImageAlias, error) {
	var alias ImageAlias
	if _, err := c.get(ctx, request{method: "GET", path: apiPath("images", "aliases", name)}, &alias); err != nil {
		return nil, fmt.Errorf("getting image alias %q: %w", name, err)
	}
	return &alias, nil
}

// ImageByAlias returns the image an alias names.
func (c *Client) ImageByAlias(ctx context.Context, name string) (*Image, error) {
	alias, err := c.GetImageAlias(ctx, name)
	if err != nil {
		return nil, err
	}
	return c.GetImage(ctx, alias.Target)
}

// CreateImageAlias names an image; an alias in use is ErrConflict.
func (c *Client) CreateImageAlias(ctx context.Context, name, fingerprint, description string) error {
	body := map[string]string{"name": name, "target": fingerprint, "description": description}
	if _, err := c.get(ctx, request{method: "POST", path: apiPath("images", "aliases"), body: body}, nil); err != nil {
		return fmt.Errorf("creating image alias %q: %w", name, err)
	}
	return nil
}

// DeleteImageAlias removes an alias (the image stays).
func (c *Client) DeleteImageAlias(ctx context.Context, name string) error {
	if _, err := c.get(ctx, request{method: "DELETE", path: apiPath("images", "aliases", name)}, nil); err != nil {
		return fmt.Errorf("deleting image alias %q: %w", name, err)
	}
	return nil
}
