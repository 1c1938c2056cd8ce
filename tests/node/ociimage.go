//go:build node

package node

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"
)

// The media types and the annotation of an OCI image layout.
const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar"
	// AnnotationImageName names the image an OCI archive holds for
	// containerd's import (ctr images import).
	AnnotationImageName = "io.containerd.image.name"
	annotationRefName   = "org.opencontainers.image.ref.name"
)

// epoch is the modification time of every file of a layer, so that an
// image of the same files always has the same digests.
var epoch = time.Unix(0, 0).UTC()

// OCIImage is a one-layer OCI image to write as an OCI archive (an image
// layout in a tar file), the form `ctr images import` reads without a
// registry.
type OCIImage struct {
	// Name is the image reference containerd knows it by
	// ("contiv.test/pause:1").
	Name string
	// Files are the files of its only layer; parent directories are
	// added.
	Files []ImageFile
	// Entrypoint, Cmd and Env are the image config's defaults.
	Entrypoint, Cmd, Env []string
}

// ImageFile is one entry of a layer: a regular file (Data, or the
// contents of the host file Source), a directory (Mode has fs.ModeDir)
// or a symbolic link (Link).
type ImageFile struct {
	// Path inside the image, relative ("bin/sh") or absolute.
	Path string
	// Mode holds the permission bits and fs.ModeDir for a directory;
	// zero means 0o755.
	Mode fs.FileMode
	// Data is a regular file's contents, unless Source names a host
	// file to read them from.
	Data   []byte
	Source string
	// Link makes the entry a symbolic link to Link.
	Link string
}

// descriptor is an OCI content descriptor.
type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int               `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// blob is content and its descriptor.
type blob struct {
	desc descriptor
	data []byte
}

func newBlob(media string, data []byte) blob {
	sum := sha256.Sum256(data)
	return blob{desc: descriptor{MediaType: media, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: len(data)}, data: data}
}

// WriteArchive writes the image as an OCI archive at file: oci-layout,
// index.json (one manifest, annotated with the image name) and the
// blobs (the uncompressed layer, the config, the manifest), every digest
// a sha256.
func (im OCIImage) WriteArchive(file string) error {
	if im.Name == "" {
		return errors.New("ociimage: the image has no name")
	}
	layerData, err := im.layer()
	if err != nil {
		return fmt.Errorf("ociimage %s: %w", im.Name, err)
	}
	layer := newBlob(mediaLayer, layerData)
	config, err := json.Marshal(map[string]any{
		"created":      epoch.Format(time.RFC3339),
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"config":       map[string]any{"Entrypoint": im.Entrypoint, "Cmd": im.Cmd, "Env": im.Env},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{layer.desc.Digest}},
		"history":      []map[string]any{{"created": epoch.Format(time.RFC3339), "created_by": "tests/node ociimage"}},
	})
	if err != nil {
		return err
	}
	cfg := newBlob(mediaConfig, config)
	manifestData, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mediaManifest,
		"config": cfg.desc, "layers": []descriptor{layer.desc}})
	if err != nil {
		return err
	}
	manifest := newBlob(mediaManifest, manifestData)
	ref := manifest.desc
	ref.Annotations = map[string]string{AnnotationImageName: im.Name, annotationRefName: refName(im.Name)}
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mediaIndex, "manifests": []descriptor{ref}})
	if err != nil {
		return err
	}
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	entries := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
	}
	for _, b := range []blob{layer, cfg, manifest} {
		entries = append(entries, struct {
			name string
			data []byte
		}{"blobs/sha256/" + strings.TrimPrefix(b.desc.Digest, "sha256:"), b.data})
	}
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: epoch}); err != nil {
			return err
		}
	}
	for _, e := range entries {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: 0o644, Size: int64(len(e.data)), ModTime: epoch}); err != nil {
			return err
		}
		if _, err := tw.Write(e.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return os.WriteFile(file, out.Bytes(), 0o644)
}

// refName is the tag of a reference ("1" of "contiv.test/pause:1"), or
// the reference itself without one.
func refName(name string) string {
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		return name[i+1:]
	}
	return name
}

// layer is the tar of the image's files, with every parent directory,
// sorted by path.
func (im OCIImage) layer() ([]byte, error) {
	files := map[string]ImageFile{}
	for _, f := range im.Files {
		p := strings.TrimPrefix(path.Clean("/"+f.Path), "/")
		if p == "" {
			return nil, fmt.Errorf("file %q: no path", f.Path)
		}
		f.Path = p
		files[p] = f
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			if _, ok := files[dir]; !ok {
				files[dir] = ImageFile{Path: dir, Mode: fs.ModeDir | 0o755}
			}
		}
	}
	names := make([]string, 0, len(files))
	for p := range files {
		names = append(names, p)
	}
	sort.Strings(names)
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for _, p := range names {
		if err := writeEntry(tw, files[p]); err != nil {
			return nil, fmt.Errorf("file %s: %w", p, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// writeEntry writes one file of a layer.
func writeEntry(tw *tar.Writer, f ImageFile) error {
	perm := int64(f.Mode.Perm())
	if perm == 0 {
		perm = 0o755
	}
	h := &tar.Header{Name: f.Path, Mode: perm, ModTime: epoch, Format: tar.FormatPAX}
	switch {
	case f.Link != "":
		h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, f.Link, 0o777
		return tw.WriteHeader(h)
	case f.Mode.IsDir():
		h.Typeflag, h.Name = tar.TypeDir, f.Path+"/"
		return tw.WriteHeader(h)
	}
	data := f.Data
	if f.Source != "" {
		var err error
		if data, err = os.ReadFile(f.Source); err != nil {
			return err
		}
	}
	h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}
