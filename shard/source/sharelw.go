package source

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/meridian-mesh/meridian/internal/quote"
	"github.com/meridian-mesh/meridian/translator"
)

// protobufType is the media type the share list/watch asks for: its objects can be read
// field by field, so an object the replica does not keep is skipped by its length.
const protobufType = "application/vnd.kubernetes.protobuf"

// maxWatchFrame bounds one watch frame (the API server's own limit on an object is 3 MiB in
// etcd; a frame holds one object).
const maxWatchFrame = 16 << 20

// shareKind is how the share list/watch reads one resource.
type shareKind struct {
	// path is the collection's path ("/apis/discovery.k8s.io/v1/endpointslices"), with
	// "namespaces/<ns>/" inserted before the resource when the source has a namespace.
	path string
	// kind is the object's kind on the wire ("EndpointSlice").
	kind string
	// service names the Service the object belongs to, from its metadata.
	service func(objMeta) string
	// full decodes an object the filter admits.
	full func(raw []byte) (runtime.Object, error)
	// unwanted is what is kept of an object the filter does not admit: nil (nothing; the
	// object is dropped), or a reduced object read from raw (the cluster IPs of a Service).
	unwanted func(m objMeta, raw []byte) (runtime.Object, error)
	// list builds the list object the reflector expects.
	list func(rv, cont string, items []runtime.Object) runtime.Object
	// placeholder is the object of the deletion an unwanted modification becomes (marked
	// with AnnotationDropped).
	placeholder func(objMeta) runtime.Object
}

// shareLW is a cache.ListerWatcher of one resource that reads protobuf and decodes in full
// only the objects whose service the filter admits: the others are read as far as their
// metadata (name, namespace, resourceVersion, labels) and then skipped, or reduced
// (shareKind.unwanted). The filter and the server-side shard selector are read on every
// list and every decoded event, so a ring change applies to what arrives next.
//
// A watch event of an object the filter does not admit is dropped when it adds the object;
// when it modifies it, it becomes a deletion of a placeholder (dropped, see isDropped), so
// that an object the cache may still hold from before a ring change leaves the cache.
type shareLW struct {
	client rest.Interface
	kind   shareKind
	// want is the filter (nil: everything is wanted).
	want atomic.Pointer[func(namespace, service string) bool]
	// selector returns the server-side shard selector to send ("" none; nil: never), and
	// echo receives, for every list sent with one, whether the response echoed shardInfo.
	selector func() string
	echo     func(sent string, sharded bool)
	// current is the decoder of the watch in progress (restartWatch ends it).
	current atomic.Pointer[shareDecoder]
	// read counts the objects read from the wire (lists and watch events), decoded or not.
	read atomic.Int64
	// lists counts the reflector's lists (pages included): its first, and each relist.
	lists atomic.Int64
	// cache is the store of the informer this feeds (set before it runs), which slim
	// reuses objects from (reuseCached).
	cache cache.Store
}

// IsWatchListSemanticsUnSupported tells the reflector to list and then watch, rather than
// stream the list through the watch: the share list reads the shardInfo echo of each list.
func (lw *shareLW) IsWatchListSemanticsUnSupported() bool { return true }

func (lw *shareLW) wants(namespace, service string) bool {
	if f := lw.want.Load(); f != nil {
		return (*f)(namespace, service)
	}
	return true
}

// slim is the informer's transform: slimObject, and then the reduction (reduce) of an object
// the filter does not admit as it is now. A Service reduced when it was read (a list's or an
// event's, shareKind.unwanted) is kept as its serviceIPs. The transform runs when an object
// enters the informer's queue, after its list or event was decoded under the filter of that
// time: a list page read before a ring change took the service away, and stored after
// Release swept the cache, is reduced here instead of being kept in full.
func (lw *shareLW) slim(obj any) (any, error) {
	obj, err := slimObject(obj)
	if err != nil {
		return obj, err
	}
	if _, tomb := obj.(cache.DeletedFinalStateUnknown); tomb || isReduced(obj) {
		return compactReduced(obj), nil
	}
	obj = lw.reduce(obj)
	if lw.cache != nil && !isReduced(obj) {
		obj = reuseCached(lw.cache, obj)
	}
	return obj, nil
}

// reduce returns obj when the filter admits its service, else what the cache keeps of it: a
// Service's cluster IPs (serviceIPs, given to handlers as IsClusterIPsOnly), or the
// placeholder of a slice (isDropped), which the handler is given as a deletion
// (IsPlaceholder) and the next sweep deletes.
func (lw *shareLW) reduce(obj any) any {
	m, ok := obj.(metav1.Object)
	if !ok {
		return obj
	}
	svc := m.GetName()
	if es, ok := obj.(*translator.EndpointSlice); ok {
		svc = es.Service // not a label: the projection keeps it as a field
	}
	if lw.wants(m.GetNamespace(), svc) {
		return obj
	}
	meta := objMeta{name: m.GetName(), namespace: m.GetNamespace(), resourceVersion: m.GetResourceVersion(), service: svc}
	if sv, ok := obj.(*corev1.Service); ok {
		return compactIPs(meta, sv.Spec.ClusterIP, sv.Spec.ClusterIPs)
	}
	return lw.kind.placeholder(meta)
}

// request is a GET of the collection with opts; without opts.ShardSelector, with the
// selector's.
func (lw *shareLW) request(opts metav1.ListOptions) *rest.Request {
	if opts.ShardSelector == "" && lw.selector != nil {
		opts.ShardSelector = lw.selector()
	}
	return lw.client.Get().AbsPath(lw.kind.path).
		SetHeader("Accept", protobufType).
		VersionedParams(&opts, scheme.ParameterCodec)
}

// ListWithContext implements cache.ListerWithContext.
func (lw *shareLW) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	lw.lists.Add(1)
	items, parts, err := lw.list(ctx, opts, lw.wants)
	if err != nil {
		return nil, err
	}
	return lw.kind.list(parts.resourceVersion, parts.continueToken, items), nil
}

// list lists with opts and returns the objects want admits, decoded, and what is kept of the
// others (shareKind.unwanted), read no further than needed, with the list's parts.
func (lw *shareLW) list(ctx context.Context, opts metav1.ListOptions, want func(ns, svc string) bool) ([]runtime.Object, listParts, error) {
	if opts.ShardSelector == "" && lw.selector != nil {
		opts.ShardSelector = lw.selector()
	}
	body, err := lw.request(opts).Do(ctx).Raw()
	if err != nil {
		return nil, listParts{}, err
	}
	env, err := parseEnvelope(body)
	if err != nil {
		return nil, listParts{}, fmt.Errorf("list %s: %w", lw.kind.path, err)
	}
	parts, err := parseList(env.raw)
	if err != nil {
		return nil, listParts{}, fmt.Errorf("list %s: %w", lw.kind.path, err)
	}
	if lw.echo != nil && opts.ShardSelector != "" {
		lw.echo(opts.ShardSelector, parts.sharded)
	}
	lw.read.Add(int64(len(parts.items)))
	items := make([]runtime.Object, 0, len(parts.items))
	for _, raw := range parts.items {
		o, err := lw.decode(raw, want)
		if err != nil {
			return nil, listParts{}, fmt.Errorf("list %s: %w", lw.kind.path, err)
		}
		if o != nil {
			items = append(items, o)
		}
	}
	parts.items = nil
	return items, parts, nil
}

// decode returns the object raw holds if want admits its service, else what is kept of an
// unwanted one (nil: nothing).
func (lw *shareLW) decode(raw []byte, want func(ns, svc string) bool) (runtime.Object, error) {
	m, err := peekMeta(raw)
	if err != nil {
		return nil, fmt.Errorf("%s metadata: %w", lw.kind.kind, err)
	}
	if want(m.namespace, lw.kind.service(m)) {
		o, err := lw.kind.full(raw)
		if err != nil {
			return nil, fmt.Errorf("%s %s/%s: %w", lw.kind.kind, m.namespace, m.name, err)
		}
		return o, nil
	}
	return lw.kind.unwanted(m, raw)
}

// WatchWithContext implements cache.WatcherWithContext.
func (lw *shareLW) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	if opts.ShardSelector == "" && lw.selector != nil {
		opts.ShardSelector = lw.selector()
	}
	body, err := lw.request(opts).Stream(ctx)
	if err != nil {
		return nil, err
	}
	d := &shareDecoder{lw: lw, body: body, selector: opts.ShardSelector}
	lw.current.Store(d)
	if lw.selector != nil && d.selector != lw.selector() {
		// The selector changed while the request was on its way: restartWatch, which runs
		// after the change, found no watch to end (or the one before this), and this one
		// would follow the old share until the API server closes it, minutes later, missing
		// every change of what was gained. End it as restartWatch would.
		d.restarted.Store(true)
		_ = body.Close()
	}
	return watch.NewStreamWatcher(d,
		apierrors.NewClientErrorReporter(http.StatusInternalServerError, "GET", "ClientWatchDecoding")), nil
}

// restartWatch ends the watch in progress as if the API server had closed it, so that the
// reflector watches again from where it was, with the selector as it is now. A watch that
// already sends that selector (always, in a ring keyed by service: "") is left alone: a
// restarted watch that had run under a second with no event is, to client-go's reflector, a
// failed one, which it follows with a relist of the whole share.
func (lw *shareLW) restartWatch() {
	d := lw.current.Load()
	if d == nil || lw.selector == nil || d.selector == lw.selector() {
		return
	}
	d.restarted.Store(true)
	_ = d.body.Close()
}

// shareDecoder reads a protobuf watch stream: length-prefixed frames of WatchEvents.
type shareDecoder struct {
	lw        *shareLW
	body      io.ReadCloser
	buf       []byte
	restarted atomic.Bool // restartWatch closed the body: the watch ends as closed normally
	selector  string      // the shard selector the watch sent ("" none)
}

// Decode implements watch.Decoder: it returns the next event the filter keeps, skipping the
// additions of unwanted objects.
func (d *shareDecoder) Decode() (watch.EventType, runtime.Object, error) {
	for {
		frame, err := d.frame()
		if err != nil {
			if d.restarted.Load() {
				return "", nil, io.EOF
			}
			return "", nil, err
		}
		d.lw.read.Add(1)
		typ, obj, err := d.event(frame)
		if err != nil {
			return "", nil, fmt.Errorf("watch %s: %w", d.lw.kind.path, err)
		}
		if obj != nil {
			return typ, obj, nil
		}
	}
}

func (d *shareDecoder) frame() ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(d.body, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxWatchFrame {
		return nil, fmt.Errorf("watch %s: frame of %d bytes exceeds %d", d.lw.kind.path, size, maxWatchFrame)
	}
	if cap(d.buf) < int(size) {
		d.buf = make([]byte, size)
	}
	d.buf = d.buf[:size]
	if _, err := io.ReadFull(d.body, d.buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return d.buf, nil
}

// event decodes one frame; a nil object means the event is skipped.
func (d *shareDecoder) event(frame []byte) (watch.EventType, runtime.Object, error) {
	// The stream's frames are WatchEvents without the envelope (the API server's raw
	// protobuf stream serializer); their objects have it.
	if bytes.HasPrefix(frame, k8sMagic) {
		env, err := parseEnvelope(frame)
		if err != nil {
			return "", nil, err
		}
		frame = env.raw
	}
	t, objEnv, err := parseWatchEvent(frame)
	if err != nil {
		return "", nil, err
	}
	typ := watch.EventType(t)
	obj, err := parseEnvelope(objEnv)
	if err != nil {
		return "", nil, err
	}
	switch typ {
	case watch.Error:
		st := &metav1.Status{}
		if err := st.Unmarshal(obj.raw); err != nil {
			return "", nil, fmt.Errorf("watch error status: %w", err)
		}
		return typ, st, nil
	case watch.Bookmark:
		o, err := d.lw.kind.full(obj.raw)
		return typ, o, err
	case watch.Added, watch.Modified, watch.Deleted:
	default:
		return "", nil, fmt.Errorf("unknown watch event type %s", quote.String(t))
	}
	if obj.kind != d.lw.kind.kind {
		return "", nil, fmt.Errorf("watch event of kind %s, want %s", quote.String(obj.kind), d.lw.kind.kind)
	}
	m, err := peekMeta(obj.raw)
	if err != nil {
		return "", nil, fmt.Errorf("%s metadata: %w", d.lw.kind.kind, err)
	}
	if d.lw.wants(m.namespace, d.lw.kind.service(m)) {
		o, err := d.lw.kind.full(obj.raw)
		if err != nil {
			return "", nil, fmt.Errorf("%s %s/%s: %w", d.lw.kind.kind, m.namespace, m.name, err)
		}
		return typ, o, nil
	}
	o, err := d.lw.kind.unwanted(m, obj.raw)
	if err != nil || o != nil {
		return typ, o, err
	}
	if typ == watch.Added {
		return typ, nil, nil
	}
	// A modification or deletion of an object the cache may hold from an older ring, or of
	// a slice whose label moved it to an unwanted service: it leaves the cache, and the
	// handler is given a slice's placeholder only (IsPlaceholder).
	return watch.Deleted, d.lw.kind.placeholder(m), nil
}

// Close implements watch.Decoder.
func (d *shareDecoder) Close() {
	_ = d.body.Close()
	d.lw.current.CompareAndSwap(d, nil)
}

// List implements cache.Lister; the reflector calls ListWithContext.
func (lw *shareLW) List(opts metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), opts)
}

// Watch implements cache.Watcher; the reflector calls WatchWithContext.
func (lw *shareLW) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), opts)
}
