package incus_test

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
)

// writeTinyImage writes a unified image tarball: the host's static busybox
// as the whole rootfs, plus a marker file that makes its fingerprint unique.
func writeTinyImage(t *testing.T, marker string) string {
	t.Helper()
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatalf("the test image is built from the host's /bin/busybox: %v", err)
	}
	path := filepath.Join(t.TempDir(), "tiny.tar.gz")
	file, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zipped := gzip.NewWriter(file)
	archive := tar.NewWriter(zipped)
	now := time.Now()
	add := func(h *tar.Header, body []byte) {
		h.ModTime = now
		h.Size = int64(len(body))
		if err := archive.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := archive.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	dir := func(name string, mode int64) { add(&tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: mode}, nil) }
	regular := func(name string, mode int64, body string) {
		add(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode}, []byte(body))
	}
	link := func(name, target string) {
		add(&tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777}, nil)
	}
	regular("metadata.yaml", 0o644, fmt.Sprintf("architecture: x86_64\ncreation_date: %d\nproperties:\n  description: isx test image %s\n  os: linux\n", now.Unix(), marker))
	for _, d := range []string{"rootfs/", "rootfs/bin/", "rootfs/sbin/", "rootfs/etc/", "rootfs/root/", "rootfs/proc/", "rootfs/sys/", "rootfs/dev/", "rootfs/run/", "rootfs/var/"} {
		dir(d, 0o755)
	}
	dir("rootfs/tmp/", 0o1777)
	dir("rootfs/var/tmp/", 0o1777)
	add(&tar.Header{Name: "rootfs/bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755}, busybox)
	for _, applet := range []string{"sh", "cat", "sleep", "mount", "ls", "rm", "ps", "setsid", "kill", "tr", "sed", "chown", "grep", "true"} {
		link("rootfs/bin/"+applet, "busybox")
	}
	link("rootfs/sbin/init", "../bin/busybox")
	regular("rootfs/etc/inittab", 0o644, "::sysinit:/bin/mount -t tmpfs tmpfs /run\n::respawn:/bin/sleep 2147483647\n")
	regular("rootfs/etc/passwd", 0o644, "root:x:0:0:root:/root:/bin/sh\n")
	regular("rootfs/etc/group", 0o644, "root:x:0:\n")
	regular("rootfs/etc/isx-marker", 0o644, marker)
	for _, closer := range []interface{ Close() error }{archive, zipped, file} {
		if err := closer.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

func TestImageImportAndAliases(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	c := incustest.Project(t)
	raw := make([]byte, 5)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	marker := hex.EncodeToString(raw)
	alias := "isxtest/" + marker
	tarball := writeTinyImage(t, marker)

	fingerprint, err := c.ImportImage(ctx, tarball)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cleanup, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.DeleteImage(cleanup, fingerprint); err != nil && !errors.Is(err, incus.ErrNotFound) {
			t.Errorf("deleting the test image: %v", err)
		}
	})
	if len(fingerprint) != 64 {
		t.Fatalf("fingerprint = %q", fingerprint)
	}
	again, err := c.ImportImage(ctx, tarball)
	if err != nil || again != fingerprint {
		t.Errorf("importing the same tarball again = %q, %v; want the same image", again, err)
	}

	if _, err := c.GetImageAlias(ctx, alias); !errors.Is(err, incus.ErrNotFound) {
		t.Fatalf("alias before creation: %v, want ErrNotFound", err)
	}
	if err := c.CreateImageAlias(ctx, alias, fingerprint, "test image"); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateImageAlias(ctx, alias, fingerprint, "again"); !errors.Is(err, incus.ErrConflict) {
		t.Errorf("creating the alias twice: %v, want ErrConflict", err)
	}
	got, err := c.GetImageAlias(ctx, alias)
	if err != nil || got.Target != fingerprint || got.Name != alias || got.Description != "test image" {
		t.Errorf("alias = %+v, %v", got, err)
	}
	image, err := c.ImageByAlias(ctx, alias)
	if err != nil || image.Fingerprint != fingerprint || image.Properties["description"] != "isx test image "+marker || image.Architecture != "x86_64" {
		t.Errorf("image by alias = %+v, %v", image, err)
	}

	// The imported image really launches.
	err = c.CreateInstance(ctx, incus.InstanceCreate{Name: "from-import", Source: incus.ImageSource(alias), Start: true})
	if err != nil {
		t.Fatal(err)
	}
	content, err := c.PullFile(ctx, "from-import", "/etc/isx-marker")
	if err != nil || string(content) != marker {
		t.Errorf("marker in the launched instance = %q, %v", content, err)
	}
	if err := c.DeleteInstance(ctx, "from-import", true); err != nil {
		t.Fatal(err)
	}

	if err := c.DeleteImageAlias(ctx, alias); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ImageByAlias(ctx, alias); !errors.Is(err, incus.ErrNotFound) {
		t.Errorf("image by deleted alias: %v, want ErrNotFound", err)
	}
	if err := c.DeleteImage(ctx, fingerprint); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetImage(ctx, fingerprint); !errors.Is(err, incus.ErrNotFound) {
		t.Errorf("deleted image: %v, want ErrNotFound", err)
	}
	images, err := c.Images(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, image := range images {
		if image.Fingerprint == fingerprint {
			t.Errorf("deleted image still listed")
		}
	}
}
