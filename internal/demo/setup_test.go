package demo

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/identity"
	"github.com/meridian-mesh/meridian/ring"
)

func TestSecretsAreMadeOnceAndReused(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	s1, err := PrepareSecrets(dir, now)
	if err != nil {
		t.Fatal(err)
	}
	if !s1.Created || s1.TrustAnchors == "" {
		t.Fatalf("first run: %+v", s1)
	}
	// Tokens are the identity service's local tokens for the ServiceAccount.
	path, err := s1.Token("shop", "web", now)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := os.ReadFile(path)
	pemKey, _ := os.ReadFile(s1.TokenKeyFile())
	k, err := identity.ParseLocalTokenKey(pemKey)
	if err != nil {
		t.Fatal(err)
	}
	rev := identity.NewLocalReviewer(&k.PublicKey)
	r, err := rev.Review(context.Background(), tok)
	if err != nil {
		t.Fatalf("the token does not review : %v", err)
	}
	if ns, sa, err := identity.ParseServiceAccountUser(r.Username); !r.Authenticated || err != nil || ns != "shop" || sa != "web" {
		t.Errorf("review %+v", r)
	}
	key1, err := ring.LoadGossipKey(s1.GossipKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := PrepareSecrets(dir, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	key2, _ := ring.LoadGossipKey(s2.GossipKeyFile)
	if s2.Created || s2.TrustAnchors != s1.TrustAnchors || string(key1) != string(key2) {
		t.Error("the second run did not reuse the identity and the gossip key")
	}
	// An identity about to expire (or broken) is made again.
	s3, err := PrepareSecrets(dir, now.Add(identityValidity-time.Hour))
	if err != nil || !s3.Created || s3.TrustAnchors == s1.TrustAnchors {
		t.Errorf("an expiring identity was reused: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "identity", identity.FileIssuerKey), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s4, err := PrepareSecrets(dir, now); err != nil || !s4.Created {
		t.Errorf("a broken identity was reused: %v", err)
	}
	if _, err := s1.Token("", "web", now); err == nil {
		t.Error("a token without a namespace")
	}
}
