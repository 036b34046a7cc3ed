package shard

import (
	"context"
	"errors"
	"fmt"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"

	"github.com/meridian-mesh/meridian/internal/destclient"
	"github.com/meridian-mesh/meridian/internal/wire"
	"github.com/meridian-mesh/meridian/snapshot"
	"github.com/meridian-mesh/meridian/translator"
)

// local serves streams for the services this replica owns from the index's snapshots.
type local struct {
	cfg Config
	idx *Index
	own *ownership
	// loading reports whether a service missing from the index may only not be loaded yet
	// (the source has not synced, or replays after a ring change): Unavailable, not NotFound.
	loading func() bool
	stop    <-chan struct{}
}

// get serves a Get until the stream ends or k changes owner (errMoved, with the view the
// client then holds). A client that comes from another replica (view not nil) first receives
// only the difference between what it holds and the current set. Each update is sent encoded,
// with its kind, through send, which must not keep b once it returns.
func (l *local) get(ctx context.Context, t translator.Target, k ServiceKey, node string, v *ringView,
	view *destclient.Held, send func(b []byte, kind wire.UpdateKind) error) (*destclient.Held, error) {
	sub, release, err := l.subscribe(t, k, node)
	if err != nil {
		return view, err
	}
	defer release()
	st := &streamState{hostname: t.Hostname}
	// step encodes into out the updates of d: on a handover's first delta, the reconciled
	// difference from what the client holds (built as messages); else the stream's own.
	step := func(d snapshot.Delta, out *updateBatch) error {
		if view == nil || !d.Initial {
			st.encode(d, out)
			return nil
		}
		ups, err := view.Reconcile(fullUpdate(d.To, t.Hostname))
		if err != nil {
			return status.Errorf(codes.Internal, "reconcile: %v", err)
		}
		st.init(d.To)
		view = nil
		if err := out.messages(ups); err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		return nil
	}
	err = l.serve(ctx, k, v, sub, func() error {
		for {
			if l.lost(k) {
				return errMoved
			}
			d, ok := sub.Next()
			if !ok {
				return nil
			}
			out := newUpdateBatch()
			err := step(d, out)
			if err == nil {
				err = out.send(send)
			}
			out.release()
			if err != nil {
				return err
			}
		}
	})
	if errors.Is(err, errMoved) {
		if view != nil {
			// Moved before the handover's first delta: the client still holds view.
			return view, err
		}
		return viewOf(sub.Base(), t.Hostname), err
	}
	return nil, err
}

// profile serves a GetProfile of a client in namespace clientNS ("" when unknown) until the
// stream ends or k changes owner (errMoved): a profile each time the port's address set, the
// Service or its ServiceProfiles change (send drops repeats).
func (l *local) profile(ctx context.Context, t translator.Target, k ServiceKey, clientNS string, v *ringView,
	send func(*pb.DestinationProfile) error) error {
	changed, stop := l.idx.changed.watch(k)
	defer func() { stop() }()
	sub, release, err := l.subscribe(t, k, "")
	if err != nil {
		return err
	}
	defer release()
	var latest *snapshot.AddressSet
	return l.serveChanges(ctx, k, v, sub, &changed, func() error {
		if l.lost(k) {
			return errMoved
		}
		for {
			d, ok := sub.Next()
			if !ok {
				break
			}
			latest = d.To
		}
		// A new watch before reading what the profile shows, so that no change is missed.
		stop()
		changed, stop = l.idx.changed.watch(k)
		svc := l.idx.Service(k)
		if translator.IsExternalName(svc) {
			return externalName(t, svc)
		}
		var endpoint *pb.WeightedAddr
		if t.Hostname != "" {
			for _, e := range latest.Sorted() {
				if e.Hostname() == t.Hostname {
					endpoint = podEndpointAddr(e)
					break
				}
			}
		}
		p := buildProfile(l.cfg, t, svc, endpoint)
		if t.Hostname == "" && p.ParentRef != nil {
			if sp := l.idx.Profile(k, clientNS); sp != nil {
				p = withServiceProfile(p, sp, t.Port)
			}
		}
		return send(p)
	})
}

// lost reports whether the current view gives k to another replica. A segment checks it
// before it passes anything on: a ring change swaps the view and then releases what the
// replica lost, so the release's changes (an emptied set, a forgotten Service) can reach a
// segment before it sees the view change, and must not reach its client.
func (l *local) lost(k ServiceKey) bool { return !ownsKey(l.own.load(), k) }

// externalName is the error for a stream of an ExternalName Service.
func externalName(t translator.Target, svc *corev1.Service) error {
	return status.Errorf(codes.InvalidArgument, "service %s.%s is of type ExternalName (%s) and has no endpoints to discover", t.Service, t.Namespace, svc.Spec.ExternalName)
}

// subscribe subscribes to port t.Port of k as a client on node sees it. It fails with
// errMoved when this replica no longer owns k, Unavailable while k may only not be loaded
// yet, NotFound when the Service is unknown, and InvalidArgument for an ExternalName Service.
func (l *local) subscribe(t translator.Target, k ServiceKey, node string) (*snapshot.Subscription, func(), error) {
	svc := l.idx.Service(k)
	if svc == nil {
		if !l.idx.Owns(k) {
			return nil, nil, errMoved
		}
		if l.loading() {
			return nil, nil, status.Errorf(codes.Unavailable, "meridian: service %s is not loaded yet on this replica; retry", k)
		}
		return nil, nil, status.Errorf(codes.NotFound, "service %s.%s not found", t.Service, t.Namespace)
	}
	if translator.IsExternalName(svc) {
		return nil, nil, externalName(t, svc)
	}
	if l.loading() && !l.idx.loaded(k) {
		// While the replica loads (its first sync, or a share it gained), a service without
		// slices may only be one whose slices have not arrived, and one whose slices name
		// pods the source does not have yet one whose pods have not (a source that keeps only
		// the pods the index needs reads them after the slices): a stream moving here keeps
		// what it holds and retries, rather than being told there is nothing.
		return nil, nil, status.Errorf(codes.Unavailable, "meridian: service %s is not loaded yet on this replica; retry", k)
	}
	sub, release := l.idx.Watch(k, t.Port, node)
	if sub == nil {
		if !l.idx.Owns(k) {
			return nil, nil, errMoved
		}
		return nil, nil, status.Errorf(codes.NotFound, "service %s.%s not found", t.Service, t.Namespace)
	}
	return sub, release, nil
}

// serve calls drain each time sub has news, until the stream ends (nil), drain fails, the
// replica stops (Unavailable) or the ring gives k to another replica (errMoved).
func (l *local) serve(ctx context.Context, k ServiceKey, v *ringView, sub *snapshot.Subscription, drain func() error) error {
	return l.serveChanges(ctx, k, v, sub, nil, drain)
}

// serveChanges is serve, calling drain also when *changed (when not nil) is closed; drain may
// replace *changed.
func (l *local) serveChanges(ctx context.Context, k ServiceKey, v *ringView, sub *snapshot.Subscription, changed *<-chan struct{}, drain func() error) error {
	var never <-chan struct{}
	for {
		other := never
		if changed != nil {
			other = *changed
		}
		select {
		case <-ctx.Done():
			return nil
		case <-l.stop:
			return errStopping
		case <-v.changed:
			v = l.own.load()
			if _, local := v.owner(k); !local {
				return errMoved
			}
			continue
		case <-sub.C():
		case <-other:
		}
		if err := drain(); err != nil {
			return err
		}
	}
}

// buildProfile is the profile of a service port: its fully qualified name, the Service as
// parent, the retry budget and whether the port is opaque. A port the Service does not
// declare gets the empty profile, as from Linkerd (the proxy then falls back to the client
// policy API). A pod's DNS name gets the pod's endpoint, and is opaque as its hint says.
func buildProfile(cfg Config, t translator.Target, svc *corev1.Service, endpoint *pb.WeightedAddr) *pb.DestinationProfile {
	fqn := fmt.Sprintf("%s.%s.svc.%s", t.Service, t.Namespace, cfg.Translator.ClusterDomain)
	if t.Hostname != "" {
		fqn = t.Hostname + "." + fqn
	} else if svc != nil && !servicePortDeclared(svc, t.Port) {
		return &pb.DestinationProfile{}
	}
	p := &pb.DestinationProfile{
		FullyQualifiedName: fqn,
		RetryBudget:        retryBudget(cfg),
		Endpoint:           endpoint,
	}
	if t.Hostname == "" {
		p.ParentRef = serviceRef(t.Service, t.Namespace, t.Port)
	}
	switch {
	case t.Hostname != "" && endpoint.GetProtocolHint() != nil:
		// A pod's DNS name: the pod's port is opaque as its endpoint's hint says (its own
		// opaque ports, the defaults, its Servers), as Linkerd's endpoint profile says; the
		// Service's may differ.
		p.OpaqueProtocol = endpoint.GetProtocolHint().GetOpaque() != nil
	case svc != nil && servicePortDeclared(svc, t.Port):
		p.OpaqueProtocol = translator.IsOpaqueService(cfg.Translator, svc, t.Port)
	}
	return p
}

// retryBudget is the default retry budget.
func retryBudget(cfg Config) *pb.RetryBudget {
	return &pb.RetryBudget{
		RetryRatio:          cfg.RetryRatio,
		MinRetriesPerSecond: cfg.RetryMinPerSecond,
		Ttl:                 durationpb.New(cfg.RetryTTL),
	}
}

func servicePortDeclared(svc *corev1.Service, port uint32) bool {
	for _, p := range svc.Spec.Ports {
		if uint32(p.Port) == port {
			return true
		}
	}
	return false
}
