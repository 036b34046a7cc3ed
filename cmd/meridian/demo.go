package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/meridian-mesh/meridian/shard"
	"github.com/meridian-mesh/meridian/shard/source"
)

func init() {
	register(&command{name: "demo", summary: "run the local mesh on a directory of Kubernetes YAML (no cluster needed)", run: runDemo})
}

func runDemo(ctx context.Context, args []string) error {
	fs := newFlagSet("demo")
	dir := fs.String("dir", "deploy/examples", "directory of Kubernetes YAML (Services, EndpointSlices, Pods)")
	addr := fs.String("addr", "127.0.0.1:8086", "Destination API address")
	adminAddr := fs.String("admin-addr", "127.0.0.1:9996", "destination "+adminUsage)
	var pprof bool
	pprofFlag(fs, &pprof)
	once := fs.Bool("once", false, "print the endpoints and exit instead of serving until interrupted")
	logOpts := consoleLogFlags(fs, "log level")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if _, err := os.Stat(*dir); err != nil {
		return fmt.Errorf("example cluster: %w", err)
	}
	srv, syncLog, err := newProcess(logOpts, *adminAddr)
	if err != nil {
		return err
	}
	defer syncLog()
	log := srv.Log
	srv.Pprof = pprof
	srv.Grace = 2 * time.Second
	dcfg := source.DefaultDirConfig(*dir)
	dcfg.Registerer = srv.Registry
	replica, err := shard.NewReplica(shard.DefaultConfig(), shard.Deps{Source: source.NewDirWithConfig(dcfg, log), Registerer: srv.Registry, Logger: log})
	if err != nil {
		return err
	}
	replica.Register(srv.WithGRPC(*addr))
	if err := srv.Listen(); err != nil {
		return err
	}
	defer srv.Close()
	grpcAddr, adminHTTP := srv.Addr(), srv.AdminAddr()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	show := func(ctx context.Context) error {
		if err := waitReady(ctx, replica.Ready, 30*time.Second); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "Meridian local mesh on %s\n  destination  %s (admin http://%s)\n\n", *dir, grpcAddr, adminHTTP)
		conn, err := grpc.NewClient(grpcAddr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		defer conn.Close()
		client := pb.NewDestinationClient(conn)
		for _, k := range replica.Index().Services() {
			svc := replica.Index().Service(k)
			if svc == nil || len(svc.Spec.Ports) == 0 || svc.Spec.ExternalName != "" {
				continue
			}
			authority := fmt.Sprintf("%s.%s.svc.cluster.local:%d", k.Name, k.Namespace, svc.Spec.Ports[0].Port)
			if err := showEndpoints(ctx, client, authority, "", false, 10*time.Second, stdout); err != nil {
				return fmt.Errorf("%s: %w", authority, err)
			}
		}
		if *once {
			cancel()
			return nil
		}
		fmt.Fprintf(stdout, "Serving; try: bin/meridian endpoints --addr %s --watch web.shop.svc.cluster.local:80\nCtrl-C stops.\n", grpcAddr)
		return nil
	}
	srv.Group.Add("replica", replica)
	srv.Group.Go("show", show)
	err = srv.Run(ctx)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	log.Debug("demo stopped", zap.Error(err))
	return err
}

// waitReady polls ready until it reports nil, ctx ends or timeout passes.
func waitReady(ctx context.Context, ready func() error, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
