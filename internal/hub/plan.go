package hub

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
)

// refuseSymlinkEscapes refuses the files whose directory is a symlink that
// leads out of the target, so that they are reported like unsafe names.
// os.Root would refuse them anyway, with a less telling error.
func (d *downloader) refuseSymlinkEscapes(files []RemoteFile, res *Result) []RemoteFile {
	kept := files[:0]
	for _, f := range files {
		if d.escapesThroughSymlink(f.Path) {
			res.Refused = append(res.Refused, f.Path)
			continue
		}
		kept = append(kept, f)
	}
	return kept
}

func (d *downloader) escapesThroughSymlink(name string) bool {
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		fi, err := d.root.Lstat(dir)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		target, err := d.root.Readlink(dir)
		if err != nil || path.IsAbs(target) || !filepath.IsLocal(filepath.FromSlash(path.Join(path.Dir(dir), target))) {
			return true
		}
	}
	return false
}

// plan decides, per file, whether it is complete on disk (skip), partially
// there (resume) or absent.
func (d *downloader) plan(files []RemoteFile, old *Manifest) ([]task, error) {
	tasks := make([]task, 0, len(files))
	for _, f := range files {
		t, err := d.planFile(f, old)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Path, err)
		}
		tasks = append(tasks, t)
	}
	return tasks, nil
}

func (d *downloader) planFile(f RemoteFile, old *Manifest) (task, error) {
	t := task{file: f}
	sum, complete, err := d.completeOnDisk(f, old)
	if err != nil {
		return t, err
	}
	if complete {
		t.skip, t.sha256 = true, sum
		return t, nil
	}
	if f.Size < 0 {
		return t, nil // nothing to compare with: fetch it whole
	}
	if fi, err := d.root.Stat(partName(f)); err == nil && fi.Mode().IsRegular() && fi.Size() <= f.Size {
		t.partial = fi.Size()
	}
	return t, nil
}

// completeOnDisk reports whether the target file is there with the right
// content. A file the previous manifest vouches for (same size, same LFS
// hash) is trusted without reading it again: rehashing 140 GB to learn
// that nothing changed would make a rerun take as long as a download.
func (d *downloader) completeOnDisk(f RemoteFile, old *Manifest) (sum string, ok bool, err error) {
	fi, err := d.root.Lstat(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	if !fi.Mode().IsRegular() || fi.Size() != f.Size {
		return "", false, nil
	}
	if old != nil && !f.IsLFS() && old.Commit != "" && d.commit != "" && !strings.EqualFold(old.Commit, d.commit) {
		// A new commit: a git file of the same size may still differ, and
		// it has no hash to tell. Such files are small; fetch them again.
		return "", false, nil
	}
	if old != nil {
		if mf, found := old.file(f.Path); found && mf.Size == f.Size && mf.SHA256 != "" && (!f.IsLFS() || mf.SHA256 == f.SHA256) {
			return mf.SHA256, true, nil
		}
	}
	if f.Size >= 64<<20 {
		d.report.Check(f) // minutes for tens of GB: say why nothing seems to happen
	}
	sum, err = d.hashFile(f.Path)
	if err != nil {
		return "", false, err
	}
	// Files outside LFS have no published sha256; their size is the check.
	return sum, !f.IsLFS() || sum == f.SHA256, nil
}

func (d *downloader) hashFile(name string) (string, error) {
	file, err := d.root.Open(name)
	if err != nil {
		return "", err
	}
	defer file.Close()
	h := sha256.New()
	if _, err := io.Copy(h, file); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// checkSpace fails before any byte is fetched if the disk cannot hold what is left.
func (d *downloader) checkSpace(tasks []task) error {
	var need int64
	files := 0
	for _, t := range tasks {
		if !t.skip {
			need += max(t.file.Size, 0) - t.partial // an unknown size counts as 0: the hub would not say
			files++
		}
	}
	d.report.Plan(files, need)
	if need == 0 {
		return nil
	}
	free, err := d.opts.FreeSpace(d.opts.Dir)
	if err != nil {
		return fmt.Errorf("checking free disk space: %w", err)
	}
	if uint64(need) > free {
		return fmt.Errorf("%w in %s: the download needs %s more, and only %s is free",
			ErrNoSpace, d.opts.Dir, FormatBytes(need), FormatBytes(int64(min(free, 1<<62))))
	}
	return nil
}
