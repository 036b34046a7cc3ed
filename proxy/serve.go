package proxy

import (
	"context"

	"go.uber.org/zap"

	"github.com/meridian-mesh/meridian/internal/serve"
	"github.com/meridian-mesh/meridian/proxy/config"
)

// Serve runs the proxy configured by cfg as its process does (`meridian proxy`): New's
// components in the group of an internal/serve process, whose admin server listens on
// cfg.AdminAddr (/debug/pprof/ with cfg.EnablePprof), until ctx ends; the group then stops
// within cfg.ShutdownGracePeriod and serve's margin.
func Serve(ctx context.Context, cfg config.Config, log *zap.Logger) error {
	p := serve.New(log, cfg.AdminAddr)
	p.Pprof = cfg.EnablePprof
	p.Group.StopTimeout = cfg.ShutdownGracePeriod + serve.StopMargin
	px, err := New(cfg, Deps{Registerer: p.Registry, Logger: log})
	if err != nil {
		return err
	}
	px.Add(&p.Group)
	if err := p.Listen(); err != nil {
		return err
	}
	defer p.Close()
	return p.Run(ctx)
}
