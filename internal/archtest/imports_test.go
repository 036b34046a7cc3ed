package archtest

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const module = "github.com/meridian-mesh/meridian"

// pkg is what `go list -json` says of a package.
type pkg struct {
	ImportPath string
	Dir        string
	Name       string
	Deps       []string
	Imports    []string
	GoFiles    []string
	Standard   bool
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	touchSources(t)
	cmd := exec.Command("go", "list", "-json", module+"/...")
	cmd.Dir = "../.."
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(out)
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("go list: %v", err)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages; the test is not looking at the module", len(pkgs))
	}
	return pkgs
}

// touchSources reads every Go file and directory of the module, so that the go command's test
// cache, which records what a test opens, runs these tests again when any of them changes
// (go list, which they run, is invisible to it).
func touchSources(t *testing.T) { eachGoFile(t, func(string, []byte) {}) }

// eachGoFile calls fn with every Go file of the module, its path relative to the module's
// root and its contents, and reports how many there were; it reads every directory on the way
// (touchSources), and skips testdata and hidden directories (.cache, .git).
func eachGoFile(t *testing.T, fn func(rel string, src []byte)) int {
	t.Helper()
	files := 0
	err := filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); p != "../.." && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			_, err := os.ReadDir(p)
			return err
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		fn(strings.TrimPrefix(p, "../../"), src)
		return nil
	})
	if err != nil {
		t.Fatalf("read the module's sources: %v", err)
	}
	return files
}

// packageDoc returns the package comment of the package in dir (from its doc.go).
func packageDoc(t *testing.T, dir string) (string, bool) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, "doc.go"), nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil || f.Doc == nil {
		return "", false
	}
	return f.Doc.Text(), true
}

var (
	mustNotRE  = regexp.MustCompile(`(?s)must\s+not\s+import(.*?)(\.\s|\.$|\n\n|$)`)
	onlyRE     = regexp.MustCompile(`(?s)Allowed\s+imports:(.*?)(\.\s|\.$|\n\n|$)`)
	backquoted = regexp.MustCompile("`([^`]+)`")
)

// forbidden extracts the patterns of a doc's "must not import" sentences.
func forbidden(doc string) []string { return quotedIn(mustNotRE, doc) }

// allowedOnly extracts the patterns of a doc's "Allowed imports:" sentence (`std` is the standard
// library); nil when the doc has none, and then only the "must not import" rules apply.
func allowedOnly(doc string) []string { return quotedIn(onlyRE, doc) }

// quotedIn returns the backquoted words of the sentences of doc that sentence matches.
func quotedIn(sentence *regexp.Regexp, doc string) []string {
	var out []string
	for _, m := range sentence.FindAllStringSubmatch(doc, -1) {
		for _, q := range backquoted.FindAllStringSubmatch(m[1], -1) {
			out = append(out, q[1])
		}
	}
	return out
}

// matches reports whether import path p matches pattern (relative patterns are within the
// module; a trailing /... matches the package and everything below it).
func matches(pattern, p string) bool {
	if !strings.Contains(strings.SplitN(pattern, "/", 2)[0], ".") {
		pattern = module + "/" + pattern
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == pattern
}

func TestEveryPackageHasADocWithImportRules(t *testing.T) {
	for _, p := range listPackages(t) {
		if len(p.GoFiles) == 0 || p.Name == "main" {
			continue
		}
		doc, ok := packageDoc(t, p.Dir)
		if !ok {
			t.Errorf("%s has no doc.go with a package comment", p.ImportPath)
			continue
		}
		if len(forbidden(doc)) == 0 {
			t.Errorf("%s: its doc.go has no \"must not import\" sentence naming packages in backquotes", p.ImportPath)
		}
	}
}

func TestImportRules(t *testing.T) {
	pkgs := listPackages(t)
	var testOnly []string
	for _, p := range pkgs {
		if doc, ok := packageDoc(t, p.Dir); ok && strings.Contains(doc, "test-only") {
			testOnly = append(testOnly, p.ImportPath)
		}
	}
	for _, p := range pkgs {
		doc, _ := packageDoc(t, p.Dir)
		rules := forbidden(doc)
		broken := map[string]bool{} // one report per rule
		for _, dep := range p.Deps {
			if dep == p.ImportPath {
				continue
			}
			for _, r := range rules {
				if matches(r, dep) && !broken[r] {
					broken[r] = true
					t.Errorf("%s depends on %s, which its doc.go forbids (%s)", p.ImportPath, dep, r)
				}
			}
			for _, to := range testOnly {
				if dep == to && !contains(testOnly, p.ImportPath) {
					t.Errorf("%s (production code) depends on the test-only package %s", p.ImportPath, dep)
				}
			}
		}
	}
}

// TestImportsOnly checks the packages whose doc.go lists its "Allowed imports:": each direct
// import outside the standard library must match one of the patterns.
func TestImportsOnly(t *testing.T) {
	std := map[string]bool{}
	cmd := exec.Command("go", "list", "std")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list std: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		std[p] = true
	}
	checked := 0
	for _, p := range listPackages(t) {
		doc, _ := packageDoc(t, p.Dir)
		only := allowedOnly(doc)
		if len(only) == 0 {
			continue
		}
		checked++
		for _, imp := range p.Imports {
			ok := false
			for _, a := range only {
				if a == "std" && std[imp] || a != "std" && matches(a, imp) {
					ok = true
					break
				}
			}
			if !ok {
				t.Errorf("%s imports %s; its doc.go allows only %s", p.ImportPath, imp, strings.Join(only, ", "))
			}
		}
	}
	if checked == 0 {
		t.Error("no doc.go has an \"Allowed imports:\" sentence; the test checks nothing")
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestRulePatterns(t *testing.T) {
	doc := "It imports grpc. It must not import `shard/...`, `cmd/...` or\n`k8s.io/client-go/...`; nor `translator`. Other text `x`. Allowed imports:\n`std` and `a.b/c/...`."
	if got := allowedOnly(doc); strings.Join(got, ",") != "std,a.b/c/..." {
		t.Errorf("allowedOnly = %q", got)
	}
	got := forbidden(doc)
	want := []string{"shard/...", "cmd/...", "k8s.io/client-go/...", "translator"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("forbidden = %q, want %q", got, want)
	}
	for _, c := range []struct {
		pattern, path string
		want          bool
	}{
		{"shard", module + "/shard", true},
		{"shard", module + "/shard/source", false},
		{"shard/...", module + "/shard/source", true},
		{"shard/...", module + "/shardx", false},
		{"k8s.io/client-go/...", "k8s.io/client-go/kubernetes", true},
		{module + "/...", module + "/ring", true},
	} {
		if got := matches(c.pattern, c.path); got != c.want {
			t.Errorf("matches(%q, %q) = %v", c.pattern, c.path, got)
		}
	}
}
