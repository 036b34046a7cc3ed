package identity_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/meridian-mesh/meridian/identity"
	"github.com/meridian-mesh/meridian/internal/testutil"
)

// TestIssuerSubjectCutShort: an issuer whose subject is 100,000 bytes long is taken, and its
// log lines and the Event of its update show a short prefix of the subject (they showed the
// whole of it).
func TestIssuerSubjectCutShort(t *testing.T) {
	p := newPKI(t)
	core, logs := observer.New(zapcore.InfoLevel)
	cfg := identity.DefaultConfig()
	cfg.ReloadInterval = 20 * time.Millisecond
	ev := &events{}
	svc, err := identity.NewService(cfg, pollOnly{&identity.FileSource{IssuerDir: p.dir}},
		identity.NewLocalReviewer(&p.tokenKey.PublicKey), identity.Options{Logger: zap.New(core), Events: ev})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.Go(t, "the reload loop", svc.Run)
	crt, key, err := identity.NewCA(strings.Repeat("x", 100_000), time.Now().Add(-time.Minute), time.Now().Add(48*time.Hour), p.anchor, p.anchorKey)
	if err != nil {
		t.Fatal(err)
	}
	p.writeIssuer(t, crt, key)
	// The Event follows the issuer's installation.
	testutil.Eventually(t, 10*time.Second, "the long-named issuer taken, and its Event", func() bool {
		return svc.Issuer().Cert.Equal(crt) && len(ev.list()) > 0
	})
	got := ev.list()
	for _, e := range got {
		if len(e) > 1024 {
			t.Errorf("an Event of %d bytes: %.200s", len(e), e)
		}
	}
	for _, e := range logs.All() {
		if len(e.Message) > 1024 {
			t.Errorf("a log message of %d bytes: %.200s", len(e.Message), e.Message)
		}
		for k, v := range e.ContextMap() {
			if s := fmt.Sprint(v); len(s) > 1024 {
				t.Errorf("log %.60q: field %s of %d bytes", e.Message, k, len(s))
			}
		}
	}
}
