package injector

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"
)

// Serve serves the webhook over HTTPS on lis with the keypair from certs until ctx ends,
// then shuts down gracefully (bounded to 5s). It also runs the certificate watcher, and
// returns only after both have stopped: nil after a shutdown caused by ctx, else the
// first error.
func Serve(ctx context.Context, lis net.Listener, h http.Handler, certs *CertReloader, log *zap.Logger) error {
	if log == nil {
		log = zap.NewNop()
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: certs.GetCertificate,
		},
		ErrorLog: zap.NewStdLog(log.Named("http")),
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watchErr := make(chan error, 1)
	go func() { watchErr <- certs.Run(ctx) }()
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.ServeTLS(lis, "", "") }()

	var err error
	select {
	case err = <-serveErr:
		cancel()
		<-watchErr
	case err = <-watchErr:
		cancel()
		_ = srv.Close()
		<-serveErr
	case <-ctx.Done():
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = srv.Shutdown(sctx)
		scancel()
		if e := <-serveErr; e != nil && !errors.Is(e, http.ErrServerClosed) {
			err = e
		}
		if e := <-watchErr; e != nil && err == nil {
			err = e
		}
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
