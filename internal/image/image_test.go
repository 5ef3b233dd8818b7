package image_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/prefixgate/prefixgate/internal/image"
)

// TestImageRunsAsNonRootFromItsOwnFilesystem builds the image as `make
// image` does, reads the archive back with go-containerregistry, unpacks
// its filesystem and runs the entrypoint from it: --version, then a
// vllmsim replica and `serve` in front of it answering a chat request.
// As root, every process runs chrooted into the unpacked filesystem as
// the image's user, so it has only what the image has and no root.
func TestImageRunsAsNonRootFromItsOwnFilesystem(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs it")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the image is linux")
	}
	ctx := context.Background()
	dir := t.TempDir()
	bin := filepath.Join(dir, "prefixgate")
	if err := image.BuildBinary(ctx, filepath.Join("..", ".."), bin, runtime.GOARCH); err != nil {
		t.Fatal(err)
	}
	version, revision, err := image.Describe(ctx, bin)
	if err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	opts := image.Options{Binary: bin, Version: version, Revision: revision, Created: created}
	archive := writeArchive(t, opts)
	if again := writeArchive(t, opts); !bytes.Equal(archive, again) {
		t.Fatal("two builds of the same binary at the same time differ: the image is not reproducible")
	}

	img := readArchive(t, archive, image.Tag(version))
	checkConfig(t, img, version)
	rootfs := unpack(t, img)
	checkBaseFiles(t, rootfs)

	out, err := runAs(rootfs, image.Entrypoint, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", image.Entrypoint, err)
	}
	if got, want := strings.TrimSpace(string(out)), "prefixgate "+version; got != want {
		t.Fatalf("--version printed %q, want %q (the image's version label)", got, want)
	}
	sim, url := startVLLMSim(t, rootfs)
	addr := freeAddr(t)
	serve, _ := start(t, rootfs, "serve", "--listen", addr, "--backend", url)
	waitReady(t, "http://"+addr)
	checkChat(t, "http://"+addr, strings.TrimPrefix(url, "http://"))
	if os.Geteuid() == 0 {
		checkUID(t, serve.Process.Pid)
		checkUID(t, sim.Process.Pid)
	}
	stop(t, serve)
	stop(t, sim)
}

func writeArchive(t *testing.T, o image.Options) []byte {
	t.Helper()
	img, err := image.Build(o)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := image.WriteArchive(&b, img, image.Tag(o.Version), o.Created); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// readArchive unpacks the tar into an OCI layout and opens it with
// go-containerregistry's layout reader, as a registry client would.
func readArchive(t *testing.T, archive []byte, tag string) v1.Image {
	t.Helper()
	dir := t.TempDir()
	untar(t, bytes.NewReader(archive), dir, false)
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("the archive is not an OCI layout: %v", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("index.json lists %d manifests, want 1", len(im.Manifests))
	}
	d := im.Manifests[0]
	if got := d.Annotations["org.opencontainers.image.ref.name"]; got != tag {
		t.Errorf("ref.name %q, want %q", got, tag)
	}
	img, err := idx.Image(d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkDigests(img); err != nil {
		t.Fatal(err)
	}
	return img
}

// checkDigests reads every layer through its compressed digest.
func checkDigests(img v1.Image) error {
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func checkConfig(t *testing.T, img v1.Image, version string) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	uid, _, _ := strings.Cut(c.User, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("config User %q: want a numeric non-root uid (Kubernetes' runAsNonRoot checks a number)", c.User)
	}
	if len(c.Entrypoint) != 1 || c.Entrypoint[0] != image.Entrypoint {
		t.Errorf("config Entrypoint %q, want [%s]", c.Entrypoint, image.Entrypoint)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []map[string]string{c.Labels, m.Annotations} {
		if a["org.opencontainers.image.version"] != version || a["org.opencontainers.image.source"] != image.Source {
			t.Errorf("labels/annotations %v: want version %q and source %q", a, version, image.Source)
		}
	}
}

// unpack extracts the image's flattened filesystem (mutate.Extract).
func unpack(t *testing.T, img v1.Image) string {
	t.Helper()
	rootfs := filepath.Join(t.TempDir(), "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		t.Fatal(err)
	}
	// The image's user must be able to reach its own root.
	for _, d := range []string{filepath.Dir(filepath.Dir(rootfs)), filepath.Dir(rootfs)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	untar(t, rc, rootfs, true)
	return rootfs
}

// untar writes a tar's directories and regular files under dir; as root
// with owners, it sets them too. A name that leaves dir fails the test.
func untar(t *testing.T, r io.Reader, dir string, owners bool) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Clean(h.Name)
		if !filepath.IsLocal(name) {
			t.Fatalf("tar entry %q leaves the directory", h.Name)
		}
		p := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				err = writeFile(p, tr)
			}
		default:
			t.Fatalf("tar entry %q has type %q; the image has only directories and files", h.Name, h.Typeflag)
		}
		if err == nil {
			err = os.Chmod(p, os.FileMode(h.Mode).Perm()|modeBits(h.Mode))
		}
		if err == nil && owners && os.Geteuid() == 0 {
			err = os.Lchown(p, h.Uid, h.Gid)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func modeBits(m int64) os.FileMode {
	if m&0o1000 != 0 {
		return os.ModeSticky
	}
	return 0
}

func writeFile(p string, r io.Reader) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	return errors.Join(err, f.Close())
}

func checkBaseFiles(t *testing.T, rootfs string) {
	t.Helper()
	passwd, err := os.ReadFile(filepath.Join(rootfs, "etc/passwd"))
	if err != nil {
		t.Fatal(err)
	}
	want := image.UserName + ":x:" + strconv.Itoa(image.UID) + ":" + strconv.Itoa(image.GID) + ":"
	if !strings.Contains(string(passwd), "\n"+want) {
		t.Errorf("/etc/passwd has no line %q:\n%s", want, passwd)
	}
	pemData, err := os.ReadFile(filepath.Join(rootfs, image.CertFile))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rest := pemData; ; n++ {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			t.Fatalf("%s: certificate %d: %v", image.CertFile, n, err)
		}
	}
	// Mozilla's store holds about 150 roots; far fewer means a broken bundle.
	if n < 100 {
		t.Errorf("%s holds %d certificates, want Mozilla's roots (over 100)", image.CertFile, n)
	}
}
