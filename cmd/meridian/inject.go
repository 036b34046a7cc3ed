package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/meridian-mesh/meridian/injector"
	"github.com/meridian-mesh/meridian/internal/manifest"
	"github.com/meridian-mesh/meridian/internal/quote"
	"github.com/meridian-mesh/meridian/internal/tlsid"
	proxyconfig "github.com/meridian-mesh/meridian/proxy/config"
)

func init() {
	register(&command{
		name:    "inject",
		summary: "add the proxy to Kubernetes manifests (files, directories or stdin) and print them",
		run:     runInject,
	})
}

// injProxyFlags registers the flags that set the injector's proxy defaults (shared by
// `inject` and `injector`). The returned func, called after parsing, maps each
// config.linkerd.io/* annotation whose default was set explicitly to its "--flag=value",
// so that `inject --manual` can say when an input annotation overrides it. It refuses (a
// usage error) a trust anchors file that is not certificates, and a flag value that the
// annotation it stands for would not take.
func injProxyFlags(fs *flag.FlagSet, cfg *injector.Config) func() (map[string]string, error) {
	p := &cfg.Proxy
	byFlag := map[string]string{}
	str := func(dst *string, name, annotation, usage string) {
		fs.StringVar(dst, name, *dst, usage)
		if annotation != "" {
			byFlag[name] = annotation
		}
	}
	fs.StringVar(&cfg.ControlPlaneNamespace, "control-plane-namespace", cfg.ControlPlaneNamespace, "namespace of destination, identity and policy")
	fs.StringVar(&cfg.ClusterDomain, "cluster-domain", cfg.ClusterDomain, "cluster DNS domain")
	fs.StringVar(&cfg.TrustDomain, "trust-domain", cfg.TrustDomain, "identity trust domain")
	fs.Func("cluster-networks", "comma-separated pod networks of the cluster, given to proxies for their cluster-* default policies (empty: the proxy's defaults, Linkerd's private ranges)", func(s string) error {
		nets, err := proxyconfig.ParsePrefixes(s)
		cfg.ClusterNetworks = nets
		return err
	})
	str(&p.Image, "proxy-image", injector.AnnotationProxyImage, "proxy image (runs --proxy-command)")
	fs.Var((*commandFlag)(&p.Command), "proxy-command", "the proxy container's command, comma-separated: meridian-proxy (the proxy built alone), or meridian,proxy for an image without it")
	fs.Var((*commandFlag)(&p.InitCommand), "proxy-init-command", "the capture init container's command, comma-separated (its args are the iptables flags)")
	str(&p.Version, "proxy-version", injector.AnnotationProxyVersionOverride, "proxy image tag")
	str(&p.InitImage, "proxy-init-image", injector.AnnotationProxyInitImage, "capture init image, with iptables (empty: the proxy image)")
	str(&p.ImagePullPolicy, "image-pull-policy", injector.AnnotationProxyImagePullPolicy, "Always, Never or IfNotPresent")
	str(&p.CPURequest, "proxy-cpu-request", injector.AnnotationProxyCPURequest, "proxy CPU request (e.g. 100m)")
	str(&p.CPULimit, "proxy-cpu-limit", injector.AnnotationProxyCPULimit, "proxy CPU limit")
	str(&p.MemoryRequest, "proxy-memory-request", injector.AnnotationProxyMemoryRequest, "proxy memory request (e.g. 20Mi)")
	str(&p.MemoryLimit, "proxy-memory-limit", injector.AnnotationProxyMemoryLimit, "proxy memory limit")
	str(&p.EphemeralRequest, "proxy-ephemeral-storage-request", injector.AnnotationProxyEphemeralRequest, "proxy ephemeral storage request")
	str(&p.EphemeralLimit, "proxy-ephemeral-storage-limit", injector.AnnotationProxyEphemeralLimit, "proxy ephemeral storage limit")
	str(&p.LogLevel, "proxy-log-level", injector.AnnotationProxyLogLevel, "proxy log level")
	str(&p.LogFormat, "proxy-log-format", injector.AnnotationProxyLogFormat, "proxy log format: plain or json")
	str(&p.SkipInboundPorts, "skip-inbound-ports", injector.AnnotationSkipInboundPorts, "inbound ports not captured (e.g. 25,8000-8100)")
	str(&p.SkipOutbound, "skip-outbound-ports", injector.AnnotationSkipOutboundPorts, "outbound ports not captured")
	str(&p.DefaultInbound, "default-inbound-policy", injector.AnnotationDefaultInboundPolicy, "proxy default inbound policy")
	fs.Int64Var(&p.UID, "proxy-uid", p.UID, "proxy user id")
	byFlag["proxy-uid"] = injector.AnnotationProxyUID
	fs.BoolVar(&p.NativeSidecar, "native-sidecar", p.NativeSidecar, "inject the proxy as a native sidecar (init container with restartPolicy Always)")
	byFlag["native-sidecar"] = injector.AnnotationNativeSidecar
	anchors := fs.String("identity-trust-anchors-file", "", "PEM file of the identity trust anchors given to proxies")
	return func() (map[string]string, error) {
		set, anns, flagOf := map[string]string{}, map[string]string{}, map[string]string{}
		fs.Visit(func(f *flag.Flag) {
			a, ok := byFlag[f.Name]
			if !ok {
				return
			}
			// An empty value means the default, and is written as no annotation (the
			// webhook would ignore an empty one with a warning).
			if strings.TrimSpace(f.Value.String()) == "" {
				_ = f.Value.Set(f.DefValue)
				return
			}
			set[a] = "--" + f.Name + "=" + f.Value.String()
			anns[a], flagOf[a] = f.Value.String(), f.Name
		})
		if *anchors != "" {
			b, err := readTrustAnchors(*anchors)
			if err != nil {
				return nil, usageError(err)
			}
			cfg.TrustAnchorsPEM = b
		}
		// Each such flag sets the default of an annotation, which is checked before it is
		// used; a default is not. Check the flags as the annotations would be checked over
		// the built-in defaults: a bad value would otherwise be copied into every pod (the
		// webhook, inject --manual) or written onto every pod template as an annotation that
		// the webhook then ignores.
		base := injector.DefaultConfig()
		_, warns, err := base.Resolve(injector.Meta{}, anns)
		if err != nil {
			return nil, usageError(err)
		}
		var errs []error
		for _, w := range warns {
			name := w.Annotation
			if f, ok := flagOf[w.Annotation]; ok {
				name = "--" + f
			}
			errs = append(errs, fmt.Errorf("%s %s: %s", name, quote.Prefix(w.Value, 64), w.Reason))
		}
		if len(errs) > 0 {
			return nil, usageError(errors.Join(errs...))
		}
		if err := cfg.Validate(); err != nil {
			return nil, usageError(err)
		}
		return set, nil
	}
}

// readTrustAnchors reads a trust anchor bundle for proxies: PEM certificates and nothing
// else. It goes into every injected pod's spec, so a file that holds a private key (the
// anchor's, given by mistake) or anything that is not a certificate is refused rather than
// copied there.
func readTrustAnchors(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--identity-trust-anchors-file: %w", err)
	}
	bundle, err := tlsid.TrustAnchorBundle(b)
	if err != nil {
		return "", fmt.Errorf("--identity-trust-anchors-file %s: %w", quote.Prefix(path, 256), err)
	}
	return string(bundle), nil
}

// commandFlag is a container command given as one comma-separated flag value, which
// replaces the default.
type commandFlag []string

func (c *commandFlag) String() string { return strings.Join(*c, ",") }
func (c *commandFlag) Set(s string) error {
	parts := strings.Split(s, ",")
	for _, p := range parts {
		if strings.TrimSpace(p) == "" {
			return fmt.Errorf("empty element in %s", quote.Prefix(s, 64))
		}
	}
	*c = parts
	return nil
}

// stampVersion marks what cfg injects as made by who (at this binary's version), and makes a
// released binary inject proxies of its own version.
func stampVersion(cfg *injector.Config, who string) {
	cfg.CreatedBy = who + " " + version
	if version != "dev" {
		cfg.Proxy.Version = version
	}
}

func runInject(_ context.Context, args []string) error {
	cfg := injector.DefaultConfig()
	stampVersion(&cfg, "meridian/cli")
	fs := newFlagSet("inject")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: meridian inject [flags] [file|directory ...|-]\n\n"+
			"Reads Kubernetes manifests (multi-document YAML or JSON; Deployments, StatefulSets,\n"+
			"DaemonSets, ReplicaSets, Jobs, CronJobs, Pods and Lists of them) from the files, the\n"+
			"directories' *.yaml, *.yml and *.json files (subdirectories too), or stdin, and prints\n"+
			"them with linkerd.io/inject: enabled on every pod template, or with\n"+
			"the proxy materialised (--manual). In --manual mode, config.linkerd.io/* annotations\n"+
			"in the input take precedence over the flags below; an invalid one is ignored with a\n"+
			"warning on stderr (the flag's value or the default applies; for\n"+
			"default-inbound-policy, deny: a value that does not parse fails closed).\n\n")
		fs.PrintDefaults()
	}
	manual := fs.Bool("manual", false, "materialise the proxy and init containers instead of adding the inject annotation")
	flagsSet := injProxyFlags(fs, &cfg)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	set, err := flagsSet()
	if err != nil {
		return err
	}
	if *manual && strings.TrimSpace(cfg.TrustAnchorsPEM) == "" {
		// A materialised proxy without trust anchors cannot start.
		return fmt.Errorf("%w: --manual needs the trust anchors the proxies verify: --identity-trust-anchors-file FILE (the ca-bundle.crt of the linkerd-identity-trust-roots ConfigMap)", errUsage)
	}
	opts := injector.ManifestOptions{Manual: *manual, Config: cfg, FlagValues: set}
	files, err := injInputs(fs.Args())
	if err != nil {
		return err
	}
	// Nothing is printed until every input is injected: `inject f | kubectl apply -f -`
	// must not apply the documents before a bad one.
	var out bytes.Buffer
	for i, f := range files {
		if i > 0 {
			fmt.Fprintln(&out, "---")
		}
		if err := injFile(f, opts, &out, stderr); err != nil {
			return err
		}
	}
	_, err = out.WriteTo(stdout)
	return err
}

// injInputs expands the command's arguments into the files to read: stdin ("-") when there
// are none, and each directory's manifest files as the directory sources read them
// (subdirectories too, sorted). A directory with a file it cannot read is refused before
// anything is written.
func injInputs(args []string) ([]string, error) {
	if len(args) == 0 {
		return []string{"-"}, nil
	}
	var files []string
	for _, a := range args {
		if fi, err := os.Stat(a); a == "-" || err != nil || !fi.IsDir() {
			files = append(files, a) // reading it reports what is wrong
			continue
		}
		found, problems, err := manifest.Files(a)
		if err != nil {
			return nil, err
		}
		for _, f := range found {
			if _, err := os.Stat(f); err != nil {
				problems = append(problems, err) // a broken link named like a manifest
			}
		}
		if len(problems) > 0 {
			return nil, errors.Join(problems...)
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("%s: no manifest files (*.yaml, *.yml, *.json) in the directory", quote.Prefix(a, 256))
		}
		files = append(files, found...)
	}
	return files, nil
}

func injFile(name string, opts injector.ManifestOptions, stdout, stderr io.Writer) error {
	var r io.Reader = os.Stdin
	label := "stdin"
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		r, label = f, name
	}
	// The directory sources' cap on a manifest file, for files and stdin alike.
	data, err := io.ReadAll(io.LimitReader(r, manifest.DefaultMaxFileSize+1))
	if err != nil {
		return fmt.Errorf("%s: %w", label, err)
	}
	if len(data) > manifest.DefaultMaxFileSize {
		return fmt.Errorf("%s: over %d MiB, the size cap of a manifest file", label, manifest.DefaultMaxFileSize>>20)
	}
	report, err := injector.InjectManifests(label, bytes.NewReader(data), stdout, opts)
	for _, l := range report {
		fmt.Fprintf(stderr, "%s: %s\n", label, l)
	}
	if err != nil {
		return err // "file:line: reason"
	}
	if len(report) == 0 {
		fmt.Fprintf(stderr, "%s: no workloads found\n", label)
	}
	return nil
}
