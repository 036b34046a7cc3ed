package manifest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// listing is what a walk of the directory found.
type listing struct {
	// files are the manifest files, sorted, including symbolic links named like one whose
	// target cannot be reached (reading them reports why, and keeps what they held).
	files []string
	// unreadable are the subdirectories that could not be read: the files known under them
	// keep what they held.
	unreadable []string
	errs       []error
}

// under reports whether p is in a directory that could not be read.
func (l *listing) under(p string) bool {
	for _, d := range l.unreadable {
		if strings.HasPrefix(p, d+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// Files lists the manifest files under root as a Dir reads them (`*.yaml`, `*.yml` and
// `*.json`, subdirectories too, names starting with "." skipped, symbolic links to files
// followed), sorted, and what it could not read (unreadable subdirectories, broken links,
// link loops, links to directories). A broken link named like a manifest is listed: opening
// it says why. It fails only when root itself cannot be read.
func Files(root string) (files []string, problems []error, err error) {
	ls, err := (&Dir{cfg: Config{Path: root}}).list()
	if err != nil {
		return nil, nil, err
	}
	return ls.files, ls.errs, nil
}

// list walks the directory. It fails only when the directory itself cannot be read.
func (d *Dir) list() (*listing, error) {
	root := d.cfg.Path
	if fi, err := os.Lstat(root); err != nil {
		return nil, err
	} else if fi.Mode()&fs.ModeSymlink != 0 {
		root += string(filepath.Separator) // walk the directory the link points to
	}
	ls := &listing{}
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, werr error) error {
		if werr != nil {
			if p == root {
				return werr
			}
			if e != nil && e.IsDir() {
				ls.unreadable = append(ls.unreadable, p)
			}
			ls.errs = append(ls.errs, &FileError{File: p, Err: fmt.Errorf("cannot read; keeping what was loaded from it: %w", unwrapPath(werr))})
			return nil
		}
		name := e.Name()
		if p != root && strings.HasPrefix(name, ".") {
			if e.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		switch {
		case e.IsDir():
		case e.Type().IsRegular():
			if manifestFile(name) {
				ls.files = append(ls.files, p)
			}
		case e.Type()&fs.ModeSymlink != 0:
			ls.symlink(p, name)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(ls.files)
	return ls, nil
}

// symlink follows a symbolic link to a file; a link to a directory is reported, not
// followed (no loops, and nothing read twice).
func (l *listing) symlink(p, name string) {
	fi, err := os.Stat(p)
	switch {
	case err != nil && manifestFile(name):
		l.files = append(l.files, p) // reading it reports the problem and keeps what it held
	case err != nil && errors.Is(err, syscall.ELOOP):
		l.errs = append(l.errs, &FileError{File: p, Err: errors.New("symbolic link loop (too many levels of symbolic links)")})
	case err != nil:
		target, _ := os.Readlink(p)
		l.errs = append(l.errs, &FileError{File: p, Err: fmt.Errorf("broken symbolic link: its target %q cannot be reached: %v", target, unwrapPath(err))})
	case fi.IsDir():
		l.errs = append(l.errs, &FileError{File: p, Err: errors.New("symbolic link to a directory, which is not followed; link the files instead")})
	case fi.Mode().IsRegular() && manifestFile(name):
		l.files = append(l.files, p)
	}
}

// diff returns the objects of want that are new or changed since delivered, and those of
// delivered that are gone, each sorted by order.
func diff(delivered, want map[Key]Object, order []string) (upserts, deletes []Object) {
	for k, o := range want {
		if old, ok := delivered[k]; !ok || old.Hash != o.Hash {
			upserts = append(upserts, o)
		}
	}
	for k, o := range delivered {
		if _, ok := want[k]; !ok {
			deletes = append(deletes, o)
		}
	}
	SortObjects(upserts, order, false)
	SortObjects(deletes, order, true)
	return upserts, deletes
}

// SortObjects sorts objects by kind in order (kinds not listed after, by name; reverse
// turns the kind order around), then namespace, then name.
func SortObjects(objs []Object, order []string, reverse bool) {
	rank := func(kind string) int {
		for i, k := range order {
			if k == kind {
				return i
			}
		}
		return len(order)
	}
	sort.Slice(objs, func(i, j int) bool {
		a, b := objs[i].Key, objs[j].Key
		if a.Kind != b.Kind {
			ra, rb := rank(a.Kind), rank(b.Kind)
			if ra == rb {
				return (a.Kind < b.Kind) != reverse
			}
			return (ra < rb) != reverse
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
}
