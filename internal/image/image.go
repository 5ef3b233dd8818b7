// Package image builds prefixgate's container image without Docker and
// without pulling a base: go-containerregistry assembles an OCI image from
// scratch with two layers (the base files: /etc/passwd and /etc/group with
// the non-root user 65532, the CA certificates, /tmp; then the static
// binary), a configuration that runs the binary as that user, and OCI
// annotations for the version, revision and source. The image is written as
// an OCI image layout in a tar archive (ReadArchive reads it back).
// Timestamps are fixed, so the same binary and the same Created time give
// the same image digest.
package image

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's fixed facts, which the chart relies on.
const (
	// Entrypoint is where the binary is in the image.
	Entrypoint = "/usr/local/bin/prefixgate"
	// UID and GID are the user the image runs as (distroless's nonroot).
	UID = 65532
	GID = 65532
	// UserName is UID's name in /etc/passwd.
	UserName = "nonroot"
	// Source is the repository the image is built from.
	Source = "https://github.com/prefixgate/prefixgate"
)

// Options say what goes into the image.
type Options struct {
	// Binary is the static linux binary to ship (BuildBinary makes it).
	Binary string
	// Version is what the binary's --version prints after "prefixgate ".
	Version string
	// Revision is the VCS revision the binary was built from, if known.
	Revision string
	// Created stamps the configuration, the history and every file; fix
	// it (SOURCE_DATE_EPOCH) for a reproducible image.
	Created time.Time
	// Arch is the GOARCH the binary was built for (default: this one).
	Arch string
}

// Annotations are the OCI annotations (also the configuration's labels).
func (o Options) Annotations() map[string]string {
	a := map[string]string{
		"org.opencontainers.image.title":   "prefixgate",
		"org.opencontainers.image.version": o.Version,
		"org.opencontainers.image.source":  Source,
		"org.opencontainers.image.created": o.Created.UTC().Format(time.RFC3339),
	}
	if o.Revision != "" {
		a["org.opencontainers.image.revision"] = o.Revision
	}
	return a
}

// Build assembles the image from an empty base.
func Build(o Options) (v1.Image, error) {
	if o.Version == "" {
		return nil, fmt.Errorf("image: no version given")
	}
	if o.Arch == "" {
		o.Arch = runtime.GOARCH
	}
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("image: the binary: %w", err)
	}
	base, err := tarLayer(baseFiles(), o.Created)
	if err != nil {
		return nil, err
	}
	app, err := tarLayer(appFiles(bin), o.Created)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: v1.Time{Time: o.Created}, CreatedBy: "prefixgate image: passwd, group, CA certificates, /tmp"}},
		mutate.Addendum{Layer: app, History: v1.History{Created: v1.Time{Time: o.Created}, CreatedBy: "prefixgate image: " + Entrypoint}},
	)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = o.Arch, "linux"
	cf.Created = v1.Time{Time: o.Created}
	cf.Config.User = strconv.Itoa(UID) + ":" + strconv.Itoa(GID)
	cf.Config.Entrypoint = []string{Entrypoint}
	cf.Config.Cmd = nil
	cf.Config.WorkingDir = "/"
	cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	cf.Config.ExposedPorts = map[string]struct{}{"8080/tcp": {}, "9002/tcp": {}, "9003/tcp": {}, "9090/tcp": {}}
	cf.Config.Labels = o.Annotations()
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	return mutate.Annotations(img, o.Annotations()).(v1.Image), nil
}
