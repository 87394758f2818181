package hub

import (
	"path"
	"path/filepath"
	"strings"
)

// IsSafePath reports whether a file name from a listing may be written under
// the target directory: relative, slash-separated, with no "..", ".", or
// empty element, no backslash and no control character. The real hub never
// lists such names; a hub that does is broken or hostile.
//
// Symlinks already in the target directory are the other way out; the
// downloader writes through an os.Root, which refuses to follow them out.
func IsSafePath(name string) bool {
	if name == "" || strings.HasPrefix(name, "/") || strings.ContainsAny(name, `\`) {
		return false
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	for _, elem := range strings.Split(name, "/") {
		if elem == "" || elem == "." || elem == ".." {
			return false
		}
	}
	return path.Clean(name) == name && filepath.IsLocal(filepath.FromSlash(name)) && !reservedName(name)
}

// reservedName keeps the listing from overwriting the downloader's own files.
func reservedName(name string) bool {
	first, _, _ := strings.Cut(name, "/")
	return name == ManifestName || first == stagingDir
}
