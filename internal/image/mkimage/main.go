// Command mkimage builds prefixgate's container image (package image) and
// writes it as an OCI image layout in a tar archive: `make image` runs it.
//
//	go run ./internal/image/mkimage --out .bin/prefixgate-image.tar
//
// It builds the static binary itself (CGO_ENABLED=0, -trimpath) from the
// module in the current directory. The image's timestamps are
// SOURCE_DATE_EPOCH (seconds; the Makefile passes the commit's time), or
// 1970-01-01 without it, so a commit always gives the same image.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/prefixgate/prefixgate/internal/image"
)

func main() {
	out := flag.String("out", ".bin/prefixgate-image.tar", "the OCI archive to write")
	binary := flag.String("binary", "", "ship this binary instead of building one (linux, static, for this machine's architecture)")
	flag.Parse()
	if err := run(context.Background(), *out, *binary); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out, binary string) error {
	created := time.Unix(0, 0).UTC()
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil || sec < 0 {
			return fmt.Errorf("SOURCE_DATE_EPOCH: %q is not a count of seconds", s)
		}
		created = time.Unix(sec, 0).UTC()
	}
	if binary == "" {
		binary = filepath.Join(filepath.Dir(out), "image", "prefixgate")
		if err := image.BuildBinary(ctx, ".", binary, runtime.GOARCH); err != nil {
			return err
		}
	}
	version, revision, err := image.Describe(ctx, binary)
	if err != nil {
		return err
	}
	img, err := image.Build(image.Options{Binary: binary, Version: version, Revision: revision, Created: created})
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := image.WriteArchive(&b, img, image.Tag(version), created); err != nil {
		return err
	}
	if err := os.WriteFile(out, b.Bytes(), 0o644); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s: prefixgate:%s %s (%d bytes)\n", out, image.Tag(version), digest, b.Len())
	return nil
}
