package image

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"fmt"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// CertFile is where the CA certificates are: the first path Go's
// crypto/x509 reads on Linux, and Debian's.
const CertFile = "/etc/ssl/certs/ca-certificates.crt"

// entry is one file or directory of a layer.
type entry struct {
	name     string // absolute path in the image
	dir      bool
	mode     int64
	uid, gid int
	data     []byte
}

// baseFiles are the files every process in the image expects: a user
// database naming root and the non-root user, the CA certificates, a
// world-writable /tmp and the user's home.
func baseFiles() []entry {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:/home/%s:/sbin/nologin\n", UserName, UID, GID, UserName, UserName)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", UserName, GID)
	return []entry{
		{name: "/etc", dir: true, mode: 0o755},
		{name: "/etc/group", mode: 0o644, data: []byte(group)},
		{name: "/etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "/etc/ssl", dir: true, mode: 0o755},
		{name: "/etc/ssl/certs", dir: true, mode: 0o755},
		{name: CertFile, mode: 0o644, data: caBundle()},
		{name: "/home", dir: true, mode: 0o755},
		{name: "/home/" + UserName, dir: true, mode: 0o700, uid: UID, gid: GID},
		{name: "/root", dir: true, mode: 0o700},
		{name: "/tmp", dir: true, mode: 0o1777},
	}
}

// appFiles is the binary.
func appFiles(bin []byte) []entry {
	return []entry{
		{name: "/usr", dir: true, mode: 0o755},
		{name: "/usr/local", dir: true, mode: 0o755},
		{name: "/usr/local/bin", dir: true, mode: 0o755},
		{name: Entrypoint, mode: 0o755, data: bin},
	}
}

// caBundle is the Mozilla root store as packaged in
// golang.org/x/crypto/x509roots/fallback, in PEM. The version is pinned in
// go.mod, so every machine builds the same bundle (the build machine's own
// store would differ from one machine to the next). Roots the package
// trusts only under a constraint (a distrust date) are left out: a PEM
// file cannot carry the constraint, and trusting them without it would
// trust more than Mozilla does.
func caBundle() []byte {
	var b bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate})
	}
	return b.Bytes()
}

// tarLayer makes an OCI layer of files, every one stamped with created.
func tarLayer(files []entry, created time.Time) (v1.Layer, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range files {
		h := &tar.Header{
			Name:    f.name[1:],
			Mode:    f.mode,
			Uid:     f.uid,
			Gid:     f.gid,
			ModTime: created,
			Format:  tar.FormatPAX,
		}
		if f.dir {
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("image: layer: %s: %w", f.name, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("image: layer: %s: %w", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	data := b.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
