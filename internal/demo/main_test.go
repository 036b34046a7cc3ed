package demo

import (
	"os"
	"testing"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// The supervisor's tests run this test binary as their children (testutil.ChildMain's modes).
func TestMain(m *testing.M) { os.Exit(testutil.ChildMain(m, nil)) }
