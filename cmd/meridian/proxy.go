package main

import (
	"context"
	"os"

	"github.com/meridian-mesh/meridian/proxy"
)

func init() {
	register(&command{
		name:    "proxy",
		summary: "the data plane: outbound 127.0.0.1:4140, inbound :4143, admin :4191 (configured by LINKERD2_PROXY_* or flags); meridian-proxy is the same proxy built alone",
		run:     runProxy,
	})
}

func runProxy(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "await" { // a pod's postStart hook
		fs := newFlagSet("proxy await")
		return proxy.AwaitCommand(ctx, fs, func() error { return parseNoArgs(fs, args[1:]) })
	}
	fs := newFlagSet("proxy")
	return proxy.Command(ctx, os.LookupEnv, fs, func() error { return parseNoArgs(fs, args) })
}
