package hub

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// ManifestName is the file the downloader writes beside the model files.
const ManifestName = "genq-model.json"

// Manifest records what a model directory holds and where it came from.
// The worker logs it at start-up.
type Manifest struct {
	Endpoint string   `json:"endpoint"`
	Repo     string   `json:"repo"`
	Revision string   `json:"revision"`
	Commit   string   `json:"commit"`
	Include  []string `json:"include,omitempty"`
	Exclude  []string `json:"exclude,omitempty"`
	// DownloadedAt is when the directory was last changed by a download.
	DownloadedAt time.Time      `json:"downloaded_at"`
	Files        []ManifestFile `json:"files"`
}

// ManifestFile is one file of the model directory.
type ManifestFile struct {
	Path   string `json:"path"` // slash-separated, relative to the directory
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"` // of the content, for every file
	LFS    bool   `json:"lfs,omitempty"`
}

// TotalSize is the sum of the files' sizes.
func (m *Manifest) TotalSize() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}

// ReadManifest reads dir's genq-model.json. A directory without one (a tiny
// generated model) gives an error for which errors.Is(err, fs.ErrNotExist)
// is true.
func ReadManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return nil, fmt.Errorf("model manifest: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("model manifest %s: %w", filepath.Join(dir, ManifestName), err)
	}
	return &m, nil
}

// sameContent reports whether two manifests describe the same download, so
// that an idempotent rerun leaves the file, and its date, alone.
func (m *Manifest) sameContent(o *Manifest) bool {
	if o == nil {
		return false
	}
	return m.Endpoint == o.Endpoint && m.Repo == o.Repo && m.Revision == o.Revision &&
		m.Commit == o.Commit && slices.Equal(m.Include, o.Include) &&
		slices.Equal(m.Exclude, o.Exclude) && slices.Equal(m.Files, o.Files)
}

func (m *Manifest) file(path string) (ManifestFile, bool) {
	if m == nil {
		return ManifestFile{}, false
	}
	for _, f := range m.Files {
		if f.Path == path {
			return f, true
		}
	}
	return ManifestFile{}, false
}

// writeManifest replaces the manifest atomically through root.
func writeManifest(root *os.Root, m *Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	tmp := ManifestName + ".tmp"
	if err := root.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("writing the manifest: %w", err)
	}
	if err := root.Rename(tmp, ManifestName); err != nil {
		return fmt.Errorf("writing the manifest: %w", err)
	}
	return nil
}

// retiredManifest is where a download moves the manifest while it changes
// the directory.
const retiredManifest = stagingDir + "/previous-" + ManifestName

// readManifestAt is previousManifest for dir, if dir exists.
func readManifestAt(dir string) *Manifest {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil
	}
	defer root.Close()
	return previousManifest(root)
}

// previousManifest is what an earlier download recorded: the manifest, or
// the one a download that stopped half-way retired.
func previousManifest(root *os.Root) *Manifest {
	if m := readManifestIn(root, ManifestName); m != nil {
		return m
	}
	return readManifestIn(root, retiredManifest)
}

// readManifestIn reads a manifest through root; a missing or broken one is
// nil: it only saves hashing on a rerun.
func readManifestIn(root *os.Root, name string) *Manifest {
	b, err := root.ReadFile(name)
	if err != nil {
		return nil
	}
	var m Manifest
	if json.NewDecoder(bytes.NewReader(b)).Decode(&m) != nil {
		return nil
	}
	return &m
}
