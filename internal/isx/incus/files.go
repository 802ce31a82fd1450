package incus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
)

// FileOptions says how PushFile creates a file.
type FileOptions struct {
	Mode uint32 // permission bits; 0 means 0644
	UID  uint32
	GID  uint32
	// MakeParents creates missing parent directories (mode 0755, owned by
	// UID:GID). Directories that exist are left as they are.
	MakeParents bool
}

// FileInfo is what Incus reports about a file it serves.
type FileInfo struct {
	Type string // "file", "directory" or "symlink"
	Mode uint32
	UID  uint32
	GID  uint32
	Size int64 // -1 when unknown
}

func filePath(p string) (string, error) {
	if !strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("invalid path %q: an absolute path inside the instance is required", p)
	}
	return path.Clean(p), nil
}

func (c *Client) filesRequest(method, instance, p string) request {
	return request{method: method, path: apiPath("instances", instance, "files"), query: url.Values{"path": {p}}}
}

// PushFile writes content to a file inside the instance, replacing it if it
// exists, so that it ends with opts' mode and owner. (Incus keeps an existing
// file's mode and owner when it overwrites, so a file whose differ is
// deleted first; the replacement is then not atomic.)
func (c *Client) PushFile(ctx context.Context, instance, filename string, content io.Reader, opts FileOptions) error {
	p, err := filePath(filename)
	if err != nil {
		return err
	}
	if opts.Mode == 0 {
		opts.Mode = 0o644
	}
	info, err := c.StatFile(ctx, instance, p)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return err
	case info.Type == "directory":
		return fmt.Errorf("pushing %s to %q: a directory is in the way", p, instance)
	case info.Mode&0o7777 != opts.Mode || info.UID != opts.UID || info.GID != opts.GID:
		if err := c.DeleteFile(ctx, instance, p); err != nil {
			return err
		}
	}
	return c.pushFile(ctx, instance, p, content, opts)
}

// pushFile writes the file without looking first: for a path known not to
// exist, or when an existing file's mode and owner may stay.
func (c *Client) pushFile(ctx context.Context, instance, p string, content io.Reader, opts FileOptions) error {
	if opts.MakeParents {
		if err := c.makeParents(ctx, instance, p, opts); err != nil {
			return err
		}
	}
	mode := opts.Mode
	if mode == 0 {
		mode = 0o644
	}
	r := c.filesRequest("POST", instance, p)
	r.body = content
	r.header = ownerHeader("file", mode, opts.UID, opts.GID)
	r.header.Set("Content-Type", "application/octet-stream")
	r.header.Set("X-Incus-write", "overwrite")
	if _, err := c.get(ctx, r, nil); err != nil {
		if errors.Is(err, ErrNotFound) && !opts.MakeParents {
			return fmt.Errorf("pushing %s to %q: its directory does not exist (set MakeParents): %w", p, instance, err)
		}
		return fmt.Errorf("pushing %s to %q: %w", p, instance, err)
	}
	return nil
}

// MakeDirectory creates one directory; an existing directory is left alone.
func (c *Client) MakeDirectory(ctx context.Context, instance, dirname string, opts FileOptions) error {
	p, err := filePath(dirname)
	if err != nil {
		return err
	}
	mode := opts.Mode
	if mode == 0 {
		mode = 0o755
	}
	r := c.filesRequest("POST", instance, p)
	r.header = ownerHeader("directory", mode, opts.UID, opts.GID)
	if _, err := c.get(ctx, r, nil); err != nil {
		return fmt.Errorf("creating directory %s in %q: %w", p, instance, err)
	}
	return nil
}

func (c *Client) makeParents(ctx context.Context, instance, p string, opts FileOptions) error {
	dirOpts := FileOptions{Mode: 0o755, UID: opts.UID, GID: opts.GID}
	parent := path.Dir(p)
	if parent == "/" {
		return nil
	}
	parts := strings.Split(strings.TrimPrefix(parent, "/"), "/")
	for i := range parts {
		if err := c.MakeDirectory(ctx, instance, "/"+strings.Join(parts[:i+1], "/"), dirOpts); err != nil {
			return err
		}
	}
	return nil
}

func ownerHeader(kind string, mode, uid, gid uint32) http.Header {
	h := http.Header{}
	h.Set("X-Incus-type", kind)
	h.Set("X-Incus-mode", fmt.Sprintf("%04o", mode))
	h.Set("X-Incus-uid", strconv.FormatUint(uint64(uid), 10))
	h.Set("X-Incus-gid", strconv.FormatUint(uint64(gid), 10))
	return h
}

// StatFile reports the type, mode and owner of a path inside the instance;
// a missing path is ErrNotFound.
func (c *Client) StatFile(ctx context.Context, instance, filename string) (*FileInfo, error) {
	p, err := filePath(filename)
	if err != nil {
		return nil, err
	}
	resp, err := c.send(ctx, c.filesRequest("HEAD", instance, p))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		// A HEAD answer has no body to explain itself.
		return nil, fmt.Errorf("looking at %s in %q: %w", p, instance, newError(resp.StatusCode, http.StatusText(resp.StatusCode)))
	}
	info := fileInfo(resp)
	if info.Type != "file" {
		info.Size = -1
	}
	return info, nil
}

// OpenFile streams a regular file from the instance; the caller closes it.
func (c *Client) OpenFile(ctx context.Context, instance, filename string) (io.ReadCloser, *FileInfo, error) {
	p, err := filePath(filename)
	if err != nil {
		return nil, nil, err
	}
	resp, err := c.send(ctx, c.filesRequest("GET", instance, p))
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		_, err := decodeEnvelope(resp)
		return nil, nil, fmt.Errorf("reading %s in %q: %w", p, instance, err)
	}
	info := fileInfo(resp)
	if info.Type != "file" {
		resp.Body.Close()
		return nil, nil, fmt.Errorf("reading %s in %q: it is a %s, not a regular file", p, instance, info.Type)
	}
	return resp.Body, info, nil
}

// PullFile reads a whole regular file from the instance. Use OpenFile for
// files that may be large.
func (c *Client) PullFile(ctx context.Context, instance, filename string) ([]byte, error) {
	body, _, err := c.OpenFile(ctx, instance, filename)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	data, err := io.ReadAll(body)
	if err != nil {
		return nil, fmt.Errorf("reading %s in %q: %w", filename, instance, err)
	}
	return data, nil
}

func fileInfo(resp *http.Response) *FileInfo {
	number := func(name string, base int) uint32 {
		n, _ := strconv.ParseUint(resp.Header.Get(name), base, 32)
		return uint32(n)
	}
	kind := resp.Header.Get("X-Incus-Type")
	if kind == "" {
		kind = "file"
	}
	return &FileInfo{
		Type: kind,
		Mode: number("X-Incus-Mode", 8),
		UID:  number("X-Incus-Uid", 10),
		GID:  number("X-Incus-Gid", 10),
		Size: resp.ContentLength,
	}
}

// DeleteFile removes a file (or empty directory) inside the instance.
func (c *Client) DeleteFile(ctx context.Context, instance, filename string) error {
	p, err := filePath(filename)
	if err != nil {
		return err
	}
	if _, err := c.get(ctx, c.filesRequest("DELETE", instance, p), nil); err != nil {
		return fmt.Errorf("deleting %s in %q: %w", p, instance, err)
	}
	return nil
}
