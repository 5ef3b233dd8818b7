package image

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Tag is the image tag for a version: Semantic Versioning's build
// metadata separator "+" is not allowed in a tag, so it becomes "_"
// (0.3.0-dev+d6035f8abcde is tagged 0.3.0-dev_d6035f8abcde).
func Tag(version string) string { return strings.ReplaceAll(version, "+", "_") }

// WriteArchive writes img as an OCI image layout in a tar archive (what
// `skopeo copy oci-archive:`, `podman load`, `ctr images import` and
// `docker load` read), its index entry named prefixgate:TAG. Every entry
// is stamped with created, so the archive is as reproducible as img.
func WriteArchive(w io.Writer, img v1.Image, tag string, created time.Time) error {
	manifest, err := img.RawManifest()
	if err != nil {
		return fmt.Errorf("image: manifest: %w", err)
	}
	mdigest, err := img.Digest()
	if err != nil {
		return fmt.Errorf("image: manifest digest: %w", err)
	}
	index, err := json.Marshal(v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType: types.OCIManifestSchema1,
			Size:      int64(len(manifest)),
			Digest:    mdigest,
			Annotations: map[string]string{
				"org.opencontainers.image.ref.name": tag,
				"io.containerd.image.name":          "prefixgate:" + tag,
			},
		}},
	})
	if err != nil {
		return fmt.Errorf("image: index: %w", err)
	}
	tw := tar.NewWriter(w)
	put := func(name string, r io.Reader, size int64) error {
		h := &tar.Header{Name: name, Mode: 0o644, Size: size, ModTime: created, Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("image: archive: %s: %w", name, err)
		}
		if _, err := io.Copy(tw, r); err != nil {
			return fmt.Errorf("image: archive: %s: %w", name, err)
		}
		return nil
	}
	putBytes := func(name string, b []byte) error { return put(name, strings.NewReader(string(b)), int64(len(b))) }
	if err := putBytes("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := putBytes("index.json", index); err != nil {
		return err
	}
	if err := putBytes(blobPath(mdigest), manifest); err != nil {
		return err
	}
	if err := putConfig(img, putBytes); err != nil {
		return err
	}
	if err := putLayers(img, put); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("image: archive: %w", err)
	}
	return nil
}

func blobPath(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }

func putConfig(img v1.Image, putBytes func(string, []byte) error) error {
	config, err := img.RawConfigFile()
	if err != nil {
		return fmt.Errorf("image: config: %w", err)
	}
	cdigest, err := img.ConfigName()
	if err != nil {
		return fmt.Errorf("image: config digest: %w", err)
	}
	return putBytes(blobPath(cdigest), config)
}

func putLayers(img v1.Image, put func(string, io.Reader, int64) error) error {
	layers, err := img.Layers()
	if err != nil {
		return fmt.Errorf("image: layers: %w", err)
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return fmt.Errorf("image: layer digest: %w", err)
		}
		size, err := l.Size()
		if err != nil {
			return fmt.Errorf("image: layer size: %w", err)
		}
		rc, err := l.Compressed()
		if err != nil {
			return fmt.Errorf("image: layer %s: %w", d, err)
		}
		err = put(blobPath(d), rc, size)
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
