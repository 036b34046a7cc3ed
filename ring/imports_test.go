package ring

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports enforces doc.go: the package imports only memberlist, xxhash, the
// Prometheus client, zap and the standard library.
func TestImports(t *testing.T) {
	allowed := []string{
		"github.com/hashicorp/memberlist",
		"github.com/cespare/xxhash/v2",
		"github.com/prometheus/client_golang/prometheus",
		"go.uber.org/zap",
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			first := strings.Split(path, "/")[0]
			if !strings.Contains(first, ".") { // standard library
				continue
			}
			ok := false
			for _, a := range allowed {
				if path == a || strings.HasPrefix(path, a+"/") {
					ok = true
				}
			}
			if !ok {
				t.Errorf("%s imports %s, which doc.go does not allow", name, path)
			}
		}
	}
}
