package identity

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/meridian-mesh/meridian/internal/filewatch"
)

// IssuerSource reads the issuer material. Load is called from one goroutine at a time
// (start-up, then the reload loop).
type IssuerSource interface {
	Load(ctx context.Context) (Material, error)
	String() string
}

// ChangeWatcher is implemented by sources that can tell when their material may have
// changed. Watch calls changed (which never blocks) on every possible change until ctx ends,
// then returns nil; it returns an error only if watching cannot start or breaks.
type ChangeWatcher interface {
	Watch(ctx context.Context, changed func()) error
}

// FileSource reads the issuer from a directory holding crt.pem and key.pem (or tls.crt and
// tls.key, the kubernetes.io/tls scheme), and the anchors from AnchorsFile (default
// ca-bundle.crt in the same directory), as mounted from Linkerd's Secret and ConfigMap.
type FileSource struct {
	IssuerDir   string
	AnchorsFile string
	Log         *zap.Logger // nil: watch problems are not logged
}

var (
	_ IssuerSource  = (*FileSource)(nil)
	_ ChangeWatcher = (*FileSource)(nil)
)

func (f *FileSource) String() string { return "files in " + f.IssuerDir }

func (f *FileSource) anchorsPath() string {
	if f.AnchorsFile != "" {
		return f.AnchorsFile
	}
	return filepath.Join(f.IssuerDir, FileTrustAnchors)
}

// Load implements IssuerSource.
func (f *FileSource) Load(context.Context) (Material, error) {
	var m Material
	crt, key := filepath.Join(f.IssuerDir, FileIssuerCert), filepath.Join(f.IssuerDir, FileIssuerKey)
	if _, err := os.Stat(crt); errors.Is(err, fs.ErrNotExist) {
		crt, key = filepath.Join(f.IssuerDir, FileIssuerCertTLS), filepath.Join(f.IssuerDir, FileIssuerKeyTLS)
		if _, err := os.Stat(crt); errors.Is(err, fs.ErrNotExist) {
			return m, fmt.Errorf("no issuer certificate in %s: want %s and %s, or %s and %s",
				f.IssuerDir, FileIssuerCert, FileIssuerKey, FileIssuerCertTLS, FileIssuerKeyTLS)
		}
	}
	var err error
	if m.CertPEM, err = os.ReadFile(crt); err != nil {
		return m, fmt.Errorf("read issuer certificate: %w", err)
	}
	if m.KeyPEM, err = os.ReadFile(key); err != nil {
		return m, fmt.Errorf("read issuer key: %w", err)
	}
	if m.AnchorsPEM, err = os.ReadFile(f.anchorsPath()); err != nil {
		return m, fmt.Errorf("read trust anchors: %w", err)
	}
	return m, nil
}

// Watch implements ChangeWatcher with internal/filewatch on the issuer directory and the
// anchors' file (Kubernetes updates mounted Secrets by swapping a symlink in the directory).
// The Service polls on its own ReloadInterval, so the watcher does not poll; it never fails.
func (f *FileSource) Watch(ctx context.Context, changed func()) error {
	cfg := filewatch.Default(f.IssuerDir, f.anchorsPath())
	cfg.Poll = 0
	return filewatch.New(cfg, f.Log).Run(ctx, changed)
}
