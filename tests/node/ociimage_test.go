//go:build node

package node

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// readArchive returns the files of a tar file by name.
func readArchive(t *testing.T, data []byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = body
		if h.Typeflag == tar.TypeSymlink {
			out[h.Name] = []byte("-> " + h.Linkname)
		}
	}
}

// An archive is an OCI image layout: index.json names the image and
// points at the manifest, every blob is stored under its sha256, the
// config's diff_ids are the layer's digest, and the layer holds the files
// with their parent directories; the same image writes the same bytes.
func TestOCIArchive(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	g.Expect(os.WriteFile(src, []byte("#!/bin/true\n"), 0o755)).To(Succeed())
	im := OCIImage{Name: "contiv.test/x:2", Entrypoint: []string{"/bin/x"}, Env: []string{"PATH=/bin"}, Files: []ImageFile{
		{Path: "bin/x", Source: src, Mode: 0o755},
		{Path: "/bin/y", Link: "x"},
		{Path: "etc/hello", Data: []byte("hi\n"), Mode: 0o644},
		{Path: "tmp", Mode: fs.ModeDir | 0o777},
	}}
	file := filepath.Join(dir, "x.tar")
	g.Expect(im.WriteArchive(file)).To(Succeed())
	data, err := os.ReadFile(file)
	g.Expect(err).NotTo(HaveOccurred())
	files := readArchive(t, data)

	blob := func(digest string) []byte {
		g.Expect(digest).To(HavePrefix("sha256:"))
		body, ok := files["blobs/sha256/"+digest[len("sha256:"):]]
		g.Expect(ok).To(BeTrue(), "blob %s", digest)
		sum := sha256.Sum256(body)
		g.Expect("sha256:"+hex.EncodeToString(sum[:])).To(Equal(digest), "the blob's content")
		return body
	}
	g.Expect(files).To(HaveKeyWithValue("oci-layout", MatchJSON(`{"imageLayoutVersion":"1.0.0"}`)))
	var index struct {
		Manifests []descriptor `json:"manifests"`
	}
	g.Expect(json.Unmarshal(files["index.json"], &index)).To(Succeed())
	g.Expect(index.Manifests).To(HaveLen(1))
	g.Expect(index.Manifests[0].Annotations).To(HaveKeyWithValue(AnnotationImageName, "contiv.test/x:2"))
	g.Expect(index.Manifests[0].Annotations).To(HaveKeyWithValue("org.opencontainers.image.ref.name", "2"))
	var manifest struct {
		Config descriptor   `json:"config"`
		Layers []descriptor `json:"layers"`
	}
	g.Expect(json.Unmarshal(blob(index.Manifests[0].Digest), &manifest)).To(Succeed())
	g.Expect(manifest.Layers).To(HaveLen(1))
	var config struct {
		Config struct{ Entrypoint, Env []string } `json:"config"`
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	g.Expect(json.Unmarshal(blob(manifest.Config.Digest), &config)).To(Succeed())
	g.Expect(config.Config.Entrypoint).To(Equal([]string{"/bin/x"}))
	g.Expect(config.RootFS.DiffIDs).To(Equal([]string{manifest.Layers[0].Digest}), "an uncompressed layer's diff ID is its digest")
	layer := readArchive(t, blob(manifest.Layers[0].Digest))
	g.Expect(layer).To(Equal(map[string][]byte{"bin/": {}, "bin/x": []byte("#!/bin/true\n"), "bin/y": []byte("-> x"),
		"etc/": {}, "etc/hello": []byte("hi\n"), "tmp/": {}}))

	again := filepath.Join(dir, "again.tar")
	g.Expect(im.WriteArchive(again)).To(Succeed())
	data2, err := os.ReadFile(again)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bytes.Equal(data, data2)).To(BeTrue(), "the same image writes the same archive")
}
