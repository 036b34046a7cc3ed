package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meridian-mesh/meridian/internal/chart"
	"github.com/meridian-mesh/meridian/internal/check"
	"github.com/meridian-mesh/meridian/internal/kube"
	"github.com/meridian-mesh/meridian/internal/quote"
)

func init() {
	register(&command{
		name:    "check",
		summary: "check an installed control plane (API, CRDs, pods, the ring, certificates, versions), like linkerd check",
		run:     runCheck,
	})
}

// errChecksFailed makes check exit 1 once the report is printed.
var errChecksFailed = errors.New("checks failed")

func runCheck(ctx context.Context, args []string) error {
	cfg := check.DefaultConfig()
	cfg.CLIVersion = chart.VersionLabel(version) // as the chart labels the pods
	fs := newFlagSet("check")
	kubeconfig := fs.String("kubeconfig", "", kube.KubeconfigUsage)
	fs.StringVar(&cfg.Namespace, "namespace", cfg.Namespace, "the control plane's namespace")
	output := fs.String("o", "text", "output: text or json")
	fs.DurationVar(&cfg.MinValidity, "min-validity", cfg.MinValidity, "how long the trust anchors, the issuer and the webhook certificate must stay valid")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if *output != "text" && *output != "json" {
		return fmt.Errorf("%w: -o %s: want text or json", errUsage, quote.Prefix(*output, 64))
	}
	if *timeout <= 0 {
		return fmt.Errorf("%w: --timeout %s: want a positive duration", errUsage, *timeout)
	}
	if cfg.MinValidity <= 0 {
		return fmt.Errorf("%w: --min-validity %s: want a positive duration", errUsage, cfg.MinValidity)
	}
	rc, err := kube.RESTConfig(*kubeconfig)
	if err != nil {
		return err
	}
	// Every request gives up with the command: some client-go calls (the server's version)
	// take no context, and would wait for an API server that never answers.
	rc.Timeout = *timeout
	kc, err := kube.ClientsFor(rc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	rep := check.Run(ctx, cfg, check.Deps{Kube: kc.Typed, Dynamic: kc.Dynamic})
	if *output == "json" {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil {
		return err
	}
	if n := len(rep.Failed()); n > 0 {
		return fmt.Errorf("%w: %d", errChecksFailed, n)
	}
	return nil
}
