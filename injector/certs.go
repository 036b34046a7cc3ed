package injector

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/meridian-mesh/meridian/internal/filewatch"
)

// CertReloader serves a TLS keypair read from two files and reloads it when they change.
// Kubernetes updates a mounted Secret by swapping a symlink in the directory, so the
// directories are watched, and a periodic re-read catches anything the watch misses.
// A keypair that fails to load (for example a cert written before its key) is ignored and
// the previous one kept until a later change makes the pair consistent.
//
// GetCertificate is safe for concurrent use and never blocks on I/O.
type CertReloader struct {
	certFile, keyFile string
	poll              time.Duration
	log               *zap.Logger

	cur      atomic.Pointer[tls.Certificate]
	certPEM  atomic.Pointer[[]byte]
	keyPEM   atomic.Pointer[[]byte]
	reloaded atomic.Int64
}

// NewCertReloader loads the keypair once, failing when it cannot. poll is the period of the
// safety-net re-read (0 means one minute). log may be nil.
func NewCertReloader(certFile, keyFile string, poll time.Duration, log *zap.Logger) (*CertReloader, error) {
	if poll <= 0 {
		poll = time.Minute
	}
	if log == nil {
		log = zap.NewNop()
	}
	c := &CertReloader{certFile: certFile, keyFile: keyFile, poll: poll, log: log}
	if _, err := c.reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// GetCertificate is a tls.Config.GetCertificate returning the current keypair.
func (c *CertReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.cur.Load(), nil
}

// Reloads counts the keypairs loaded after the first.
func (c *CertReloader) Reloads() int64 { return c.reloaded.Load() }

// reload reads both files and swaps in the keypair when their contents changed.
func (c *CertReloader) reload() (bool, error) {
	certPEM, err := os.ReadFile(c.certFile)
	if err != nil {
		return false, fmt.Errorf("read TLS certificate %s: %w", c.certFile, err)
	}
	keyPEM, err := os.ReadFile(c.keyFile)
	if err != nil {
		return false, fmt.Errorf("read TLS key %s: %w", c.keyFile, err)
	}
	if old := c.certPEM.Load(); old != nil && bytes.Equal(*old, certPEM) && bytes.Equal(*c.keyPEM.Load(), keyPEM) {
		return false, nil
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return false, fmt.Errorf("load TLS keypair %s, %s: %w", c.certFile, c.keyFile, err)
	}
	first := c.cur.Load() == nil
	c.cur.Store(&pair)
	c.certPEM.Store(&certPEM)
	c.keyPEM.Store(&keyPEM)
	if !first {
		c.reloaded.Add(1)
	}
	return true, nil
}

func (c *CertReloader) tryReload() {
	changed, err := c.reload()
	switch {
	case err != nil:
		c.log.Warn("TLS keypair not reloaded; keeping the previous one", zap.Error(err))
	case changed:
		c.log.Info("TLS keypair reloaded", zap.String("cert", c.certFile))
	}
}

// Run watches the files until ctx ends, reloading on change and every poll period
// (internal/filewatch; it never fails). It returns nil when ctx ends.
func (c *CertReloader) Run(ctx context.Context) error {
	cfg := filewatch.Default(c.certFile, c.keyFile)
	cfg.Poll = c.poll
	w := filewatch.New(cfg, c.log)
	// A change between the initial load and the watch being set up is caught here.
	c.tryReload()
	return w.Run(ctx, c.tryReload)
}
