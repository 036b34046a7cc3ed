package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/meridian-mesh/meridian/internal/destclient"
	"github.com/meridian-mesh/meridian/internal/wire"
)

func init() {
	register(&command{name: "endpoints", summary: "show the endpoints a Destination replica serves for an authority", run: runEndpoints})
}

func runEndpoints(ctx context.Context, args []string) error {
	fs := newFlagSet("endpoints")
	addr := fs.String("addr", "localhost:8086", "Destination API address")
	watch := fs.Bool("watch", false, "keep the stream open and print every update")
	token := fs.String("context-token", "", `context token sent with the request, e.g. {"ns":"shop"}`)
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for the first update")
	const argsUsage = "<service>.<namespace>.svc.<cluster-domain>[:port] ..."
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: meridian endpoints [flags] %s\n\nflags:\n", argsUsage)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() == 0:
		return fmt.Errorf("%w: no authority given: meridian endpoints [flags] %s", errUsage, argsUsage)
	case *watch && fs.NArg() > 1:
		return fmt.Errorf("%w: --watch follows one authority, not %d", errUsage, fs.NArg())
	case *timeout <= 0:
		return fmt.Errorf("%w: --timeout %v: want a positive duration", errUsage, *timeout)
	}
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := pb.NewDestinationClient(conn)
	for _, authority := range fs.Args() {
		if err := showEndpoints(ctx, client, authority, *token, *watch, *timeout, stdout); err != nil {
			return fmt.Errorf("%s from %s: %w", authority, *addr, err)
		}
	}
	return nil
}

// showEndpoints opens a Get stream, prints the first state as a table and, with watch, every
// later update until ctx ends. timeout bounds everything up to the first update: connecting
// (a server that accepts connections and never answers holds a gRPC client for its 20 s
// connect timeout otherwise), opening the stream and the answer.
func showEndpoints(ctx context.Context, client pb.DestinationClient, authority, token string, watch bool, timeout time.Duration, out io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	first := time.AfterFunc(timeout, cancel)
	stream, err := client.Get(ctx, &pb.GetDestination{Scheme: "k8s", Path: authority, ContextToken: token})
	var u *pb.Update
	if err == nil {
		u, err = stream.Recv()
	}
	if fired := !first.Stop(); err != nil {
		if fired {
			return fmt.Errorf("no answer within %s (is this the Destination API's gRPC address?)", timeout)
		}
		return err
	}
	view := destclient.NewView()
	if err := view.Apply(u); err != nil {
		return err
	}
	printTable(out, authority, view)
	if !watch {
		return nil
	}
	for {
		u, err := stream.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := view.Apply(u); err != nil {
			return err
		}
		printUpdate(out, u)
	}
}

func printTable(out io.Writer, authority string, v *destclient.View) {
	fmt.Fprintf(out, "%s\n", authority)
	if v.NoEndpoints != nil {
		fmt.Fprintf(out, "  no endpoints (service exists: %v)\n\n", v.NoEndpoints.GetExists())
		return
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAMESPACE\tIP\tPORT\tPOD\tSERVICE\tIDENTITY\tHINT")
	for _, ap := range v.Sorted() {
		a := v.Addrs[ap]
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\t%s\n", v.SetLabels["namespace"], ap.Addr(), ap.Port(),
			dash(a.GetMetricLabels()["pod"]), v.SetLabels["service"], dash(destclient.Identity(a)), dash(destclient.Hint(a)))
	}
	tw.Flush()
	fmt.Fprintln(out)
}

func printUpdate(out io.Writer, u *pb.Update) {
	switch x := u.GetUpdate().(type) {
	case *pb.Update_Add:
		for _, a := range x.Add.GetAddrs() {
			ap, _ := wire.ToAddrPort(a.GetAddr())
			fmt.Fprintf(out, "+ %s pod=%s identity=%s hint=%s\n", ap, dash(a.GetMetricLabels()["pod"]), dash(destclient.Identity(a)), dash(destclient.Hint(a)))
		}
	case *pb.Update_Remove:
		for _, a := range x.Remove.GetAddrs() {
			ap, _ := wire.ToAddrPort(a)
			fmt.Fprintf(out, "- %s\n", ap)
		}
	case *pb.Update_NoEndpoints:
		fmt.Fprintf(out, "  no endpoints (service exists: %v)\n", x.NoEndpoints.GetExists())
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
