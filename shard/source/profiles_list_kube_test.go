package source

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/meridian-mesh/meridian/internal/kubetest"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/translator"
)

// profileRequests is a transport wrapper (rest.Config.Wrap) around the dynamic client the
// source reads ServiceProfiles with: it counts the GETs of one profile and the LISTs (pages
// included), runs afterList once after the first LIST's response has arrived (the API
// server has taken its snapshot), and answers LIST requests for which failList reports true
// with failure instead of sending them.
type profileRequests struct {
	gets, lists atomic.Int64
	afterList   func()
	failList    func(*http.Request) bool
	once        sync.Once
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (p *profileRequests) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		path := r.URL.Path
		isList := r.Method == http.MethodGet && strings.HasSuffix(path, "/serviceprofiles") && r.URL.Query().Get("watch") == ""
		switch {
		case isList:
			p.lists.Add(1)
			if p.failList != nil && p.failList(r) {
				return expiredResponse(r), nil
			}
		case r.Method == http.MethodGet && strings.Contains(path, "/serviceprofiles/"):
			p.gets.Add(1)
		}
		resp, err := rt.RoundTrip(r)
		if isList && err == nil && p.afterList != nil {
			p.once.Do(p.afterList)
		}
		return resp, err
	})
}

// expiredResponse is the API server's answer to a continue token too old to serve.
func expiredResponse(r *http.Request) *http.Response {
	body := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"The provided continue parameter is too old to display a consistent list result.","reason":"Expired","code":410}`
	return &http.Response{StatusCode: http.StatusGone, Status: "410 Gone", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": []string{"application/json"}}, Body: io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)), Request: r}
}

// delivery is one OnServiceProfile call.
type delivery struct {
	rv, route string
	deleted   bool
}

// historyRecorder is a profileRecorder that keeps every delivery of each profile, in order.
type historyRecorder struct {
	*profileRecorder
	hmu     sync.Mutex
	history map[string][]delivery
}

func newHistoryRecorder(want func(name string) bool) *historyRecorder {
	r := &historyRecorder{profileRecorder: &profileRecorder{recorder: newRecorder()}, history: map[string][]delivery{}}
	r.want.Store(&want)
	return r
}

func (r *historyRecorder) OnServiceProfile(p *translator.ServiceProfile, deleted bool) {
	d := delivery{rv: p.ResourceVersion, deleted: deleted}
	if len(p.Spec.Routes) > 0 {
		d.route = p.Spec.Routes[0].Name
	}
	r.hmu.Lock()
	r.history[p.Namespace+"/"+p.Name] = append(r.history[p.Namespace+"/"+p.Name], d)
	r.hmu.Unlock()
	r.profileRecorder.OnServiceProfile(p, deleted)
}

// last returns the last delivery of the profile key, and whether there was one.
func (r *historyRecorder) last(key string) (delivery, bool) {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	h := r.history[key]
	if len(h) == 0 {
		return delivery{}, false
	}
	return h[len(h)-1], true
}

// checkLatest checks that every profile in ns that want accepts was delivered last as its
// current state on the API server (wanted ones the server no longer has, as deleted), and
// that no profile's deliveries ever went back to an older resourceVersion (the test API
// server's are etcd revisions, which grow).
func (r *historyRecorder) checkLatest(t *testing.T, env *kubetest.Env, ns string, want func(string) bool) {
	t.Helper()
	list, err := env.Dynamic.Resource(profileResource).Namespace(ns).List(apiCtx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	current := map[string]string{}
	for _, u := range list.Items {
		if want(u.GetName()) {
			current[ns+"/"+u.GetName()] = u.GetResourceVersion()
		}
	}
	r.hmu.Lock()
	defer r.hmu.Unlock()
	for key, rv := range current {
		h := r.history[key]
		if len(h) == 0 || h[len(h)-1].deleted || h[len(h)-1].rv != rv {
			t.Errorf("profile %s: deliveries %+v, want the last at resourceVersion %s", key, h, rv)
		}
	}
	for key, h := range r.history {
		if _, ok := current[key]; !ok && !h[len(h)-1].deleted {
			t.Errorf("profile %s is gone (or unwanted) but was last delivered as %+v", key, h[len(h)-1])
		}
		prev := uint64(0)
		for _, d := range h {
			if d.deleted {
				prev = 0 // a profile created again starts anew
				continue
			}
			n, err := strconv.ParseUint(d.rv, 10, 64)
			if err != nil || n < prev {
				t.Errorf("profile %s: deliveries %+v go back to an older version", key, h)
				break
			}
			prev = n
		}
	}
}

// setRoute replaces the spec of the ServiceProfile ns/name in sps with one route named route
// (a GET match), and returns its new resourceVersion.
func setRoute(ctx context.Context, sps dynamic.ResourceInterface, ns, name, route string) (string, error) {
	cur, err := sps.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	cur.Object["spec"] = profileObject(ns, name, route, map[string]any{"method": "GET"}).Object["spec"]
	u, err := sps.Update(ctx, cur, metav1.UpdateOptions{})
	if err != nil {
		return "", err
	}
	return u.GetResourceVersion(), nil
}

// createProfiles creates ServiceProfiles named prefix-0 ... prefix-(n-1) in ns with route r1;
// those whose index invalid accepts with a condition the sp-validator refuses.
func createProfiles(t *testing.T, env *kubetest.Env, ns, prefix string, n int, invalid func(int) bool) {
	t.Helper()
	ctx := apiCtx(t)
	sps := env.Dynamic.Resource(profileResource).Namespace(ns)
	for i := range n {
		cond := map[string]any{"pathRegex": "/a"}
		if invalid != nil && invalid(i) {
			cond = map[string]any{}
		}
		if _, err := sps.Create(ctx, profileObject(ns, fmt.Sprintf("%s-%d", prefix, i), "r1", cond), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// newProfileSource returns a Kubernetes source on ns whose dynamic client (the one that reads
// ServiceProfiles whole) goes through cfg, and its registry; Run it with runProfileSource.
func newProfileSource(t *testing.T, env *kubetest.Env, ns string, cfg *rest.Config) (*Kubernetes, *prometheus.Registry) {
	t.Helper()
	md, err := metadata.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	return NewKubernetesFrom(KubernetesClients{Typed: env.Client, Dynamic: dyn, Metadata: md}, KubernetesConfig{Namespace: ns}, reg, zaptest.NewLogger(t)), reg
}

func runProfileSource(t *testing.T, src *Kubernetes, h Handler) {
	t.Helper()
	testutil.Go(t, "Run", func(ctx context.Context) error { return src.Run(ctx, h) })
	testutil.Eventually(t, apiTimeout, "the source to sync", src.Synced)
}

// wrapped is a copy of env's config whose transport goes through reqs.
func wrapped(env *kubetest.Env, reqs *profileRequests) *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(reqs.wrap)
	return cfg
}

func profileLists(t *testing.T, reg prometheus.Gatherer) float64 {
	t.Helper()
	for _, m := range testutil.Gathered(t, reg, "destination_source_lists_total") {
		for _, l := range m.GetLabel() {
			if l.GetName() == "resource" && l.GetValue() == "serviceprofiles" {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func wantPrefix(prefixes ...string) func(string) bool {
	return func(name string) bool {
		for _, p := range prefixes {
			if strings.HasPrefix(name, p+"-") {
				return true
			}
		}
		return false
	}
}

// syncIdle waits until the source has no profile left to read.
func syncIdle(t *testing.T, src *Kubernetes) {
	t.Helper()
	testutil.Eventually(t, apiTimeout, "the profiles to be read", func() bool {
		src.mu.Lock()
		f := src.profiles
		src.mu.Unlock()
		return f != nil && f.idle()
	})
}

// TestProfilesListedAtStart: a replica that wants 300 of 550 ServiceProfiles (two pages of
// the LIST) becomes ready with every wanted one delivered, an invalid one with its Problem,
// read by LIST (the dynamic client's requests, counted by a transport wrapper, and
// destination_source_lists_total{resource="serviceprofiles"}) with few GETs or none; a Replay
// after it wants 50 more reads them by LIST too; a change that follows is read with a GET.
func TestProfilesListedAtStart(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t, nil)
	createProfiles(t, env, ns, "w", 300, func(i int) bool { return i == 7 })
	createProfiles(t, env, ns, "u", 200, nil)
	createProfiles(t, env, ns, "v", 50, nil)
	reqs := &profileRequests{}
	src, reg := newProfileSource(t, env, ns, wrapped(env, reqs))
	want := wantPrefix("w")
	rec := newHistoryRecorder(want)
	runProfileSource(t, src, rec)
	// Synced waits for the profiles to be read.
	for i := range 300 {
		p, _ := rec.get(KindServiceProfile + " " + ns + fmt.Sprintf("/w-%d", i)).(*translator.ServiceProfile)
		switch {
		case p == nil:
			t.Fatalf("profile w-%d not delivered by the time the source synced", i)
		case i == 7 && !strings.Contains(p.Problem, "A request match must have a field set"):
			t.Fatalf("the invalid profile was delivered without its problem: %+v", p)
		case i != 7 && (p.Problem != "" || len(p.Spec.Routes) != 1 || p.Spec.Routes[0].Name != "r1"):
			t.Fatalf("profile w-%d delivered as %+v", i, p)
		}
	}
	rec.checkLatest(t, env, ns, want)
	gets, lists := reqs.gets.Load(), reqs.lists.Load()
	t.Logf("start: %d GETs, %d LIST requests", gets, lists)
	if lists < 2 || gets > 30 {
		t.Fatalf("start read 300 wanted profiles with %d GETs and %d LIST requests; want few GETs and a LIST of 2 pages", gets, lists)
	}
	if m := profileLists(t, reg); m < 2 {
		t.Fatalf(`destination_source_lists_total{resource="serviceprofiles"} = %v, want 2 or more`, m)
	}
	for key := range rec.history {
		if !strings.HasPrefix(key, ns+"/w-") {
			t.Fatalf("unwanted profile %s delivered", key)
		}
	}

	// The handler wants the v- profiles too: Replay reads its 350 by LIST.
	want = wantPrefix("w", "v")
	rec.setWant(want)
	if err := src.Replay(apiCtx(t)); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if rec.get(KindServiceProfile+" "+ns+fmt.Sprintf("/v-%d", i)) == nil {
			t.Fatalf("profile v-%d not delivered by Replay", i)
		}
	}
	rec.checkLatest(t, env, ns, want)
	gets2, lists2 := reqs.gets.Load(), reqs.lists.Load()
	t.Logf("replay: %d GETs, %d LIST requests", gets2-gets, lists2-lists)
	if lists2-lists < 2 || gets2-gets > 30 {
		t.Fatalf("Replay read 350 profiles with %d GETs and %d LIST requests; want few GETs and a LIST", gets2-gets, lists2-lists)
	}

	// A change alone is read with a GET.
	if _, err := setRoute(apiCtx(t), env.Dynamic.Resource(profileResource).Namespace(ns), ns, "w-3", "r2"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, apiTimeout, "the update", func() bool { d, _ := rec.last(ns + "/w-3"); return d.route == "r2" })
	if g, l := reqs.gets.Load(), reqs.lists.Load(); g == gets2 || l != lists2 {
		t.Fatalf("one change was read with %d GETs and %d LIST requests; want a GET", g-gets2, l-lists2)
	}
	syncIdle(t, src)
	rec.checkLatest(t, env, ns, want)
}

// TestProfilesChangedDuringList: profiles that change after the LIST's snapshot end at their
// latest state. Once the API server has answered the LIST, and before the source reads its
// answer, one wanted profile is updated and one deleted, and the test waits until the
// informer has both: the updated one is delivered at its new version only (read with a GET,
// the listed version being older than the informer's), the deleted one as deleted only; one updated
// after the source synced ends at its latest version too; no profile is ever delivered at an
// older version than before.
func TestProfilesChangedDuringList(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t, nil)
	createProfiles(t, env, ns, "w", 100, nil)
	createProfiles(t, env, ns, "u", 20, nil)
	sps := env.Dynamic.Resource(profileResource).Namespace(ns)
	update := func(ctx context.Context, name, route string) (string, error) {
		return setRoute(ctx, sps, ns, name, route)
	}
	reqs := &profileRequests{}
	src, _ := newProfileSource(t, env, ns, wrapped(env, reqs))
	var hookErr error
	hookDone := make(chan struct{})
	reqs.afterList = func() {
		defer close(hookDone)
		ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
		defer cancel()
		rv, err := update(ctx, "w-1", "r2")
		if err == nil {
			err = sps.Delete(ctx, "w-2", metav1.DeleteOptions{})
		}
		if err != nil {
			hookErr = err
			return
		}
		src.mu.Lock()
		f := src.profiles
		src.mu.Unlock()
		tick := time.NewTicker(testutil.PollInterval)
		defer tick.Stop()
		for {
			if f.cachedVersion(ns+"/w-1") == rv && f.cachedVersion(ns+"/w-2") == "" {
				return
			}
			select {
			case <-ctx.Done():
				hookErr = fmt.Errorf("the informer did not see the update and the deletion: %w", ctx.Err())
				return
			case <-tick.C:
			}
		}
	}
	want := wantPrefix("w")
	rec := newHistoryRecorder(want)
	runProfileSource(t, src, rec)
	testutil.Wait(t, apiTimeout, "the changes during the LIST", func() { <-hookDone })
	if hookErr != nil {
		t.Fatal(hookErr)
	}
	syncIdle(t, src)
	t.Logf("%d GETs, %d LIST requests", reqs.gets.Load(), reqs.lists.Load())
	// The listed versions, older than the informer's, are not delivered at all.
	rec.hmu.Lock()
	h1, h2 := rec.history[ns+"/w-1"], rec.history[ns+"/w-2"]
	rec.hmu.Unlock()
	if len(h1) != 1 || h1[0].deleted || h1[0].route != "r2" {
		t.Errorf("the profile updated during the LIST was delivered as %+v, want once, with route r2", h1)
	}
	if len(h2) != 1 || !h2[0].deleted {
		t.Errorf("the profile deleted during the LIST was delivered as %+v, want once, deleted", h2)
	}
	if rec.get(KindServiceProfile+" "+ns+"/w-2") != nil {
		t.Error("the profile deleted during the LIST is held by the handler")
	}
	rec.checkLatest(t, env, ns, want)

	// After the LIST: an update is delivered at its latest version.
	for _, route := range []string{"r3", "r4"} {
		if _, err := update(apiCtx(t), "w-5", route); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, apiTimeout, "the updates after the LIST", func() bool { d, _ := rec.last(ns + "/w-5"); return d.route == "r4" })
	syncIdle(t, src)
	rec.checkLatest(t, env, ns, want)
}

// TestProfilesListFails: a LIST that fails loses no profile: what it did not deliver is read
// with GETs. Two failures are tested on the real API server: RBAC that lets the source get
// ServiceProfiles but not list them (the source's client impersonates a user with such a
// Role, and the Servers the same client follows), and an expired continue token on the second page (the transport answers 410 for it),
// after the first page was delivered.
func TestProfilesListFails(t *testing.T) {
	env := kubetest.Start(t)
	t.Run("forbidden", func(t *testing.T) {
		ns := env.Namespace(t, nil)
		createProfiles(t, env, ns, "w", 100, nil)
		createProfiles(t, env, ns, "u", 20, nil)
		user := "profile-getter-" + ns
		ctx := apiCtx(t)
		if _, err := env.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "get-profiles"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"linkerd.io"}, Resources: []string{"serviceprofiles"}, Verbs: []string{"get"}},
				{APIGroups: []string{"policy.linkerd.io"}, Resources: []string{"servers"}, Verbs: []string{"list", "watch"}}, // the dynamic client's informer
			},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := env.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "get-profiles"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "get-profiles"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: "rbac.authorization.k8s.io", Name: user}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		reqs := &profileRequests{}
		cfg := wrapped(env, reqs)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
		getter, err := dynamic.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		testutil.EventuallyNoError(t, apiTimeout, "the Role to let the user get a profile", func() error {
			_, err := getter.Resource(profileResource).Namespace(ns).Get(ctx, "w-0", metav1.GetOptions{})
			return err
		})
		if _, err := getter.Resource(profileResource).Namespace(ns).List(ctx, metav1.ListOptions{Limit: 1}); err == nil {
			t.Fatal("the user can list profiles")
		}
		gets0, lists0 := reqs.gets.Load(), reqs.lists.Load()
		src, reg := newProfileSource(t, env, ns, cfg)
		want := wantPrefix("w")
		rec := newHistoryRecorder(want)
		runProfileSource(t, src, rec)
		rec.checkLatest(t, env, ns, want)
		gets, lists := reqs.gets.Load()-gets0, reqs.lists.Load()-lists0
		t.Logf("%d GETs, %d LIST requests", gets, lists)
		if lists < 1 || gets < 100 {
			t.Fatalf("%d GETs and %d LIST requests; want a LIST tried, and a GET of each of the 100 profiles", gets, lists)
		}
		if m := profileLists(t, reg); m < 1 {
			t.Fatalf(`destination_source_lists_total{resource="serviceprofiles"} = %v, want the failed LIST counted`, m)
		}
		// Replay: the LIST fails again, and the GETs deliver everything again.
		rec.Take()
		if err := src.Replay(apiCtx(t)); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range rec.Take() {
			if strings.HasPrefix(e, "+"+KindServiceProfile+" "+ns+"/w-") {
				n++
			}
		}
		if n != 100 {
			t.Fatalf("Replay delivered %d profiles, want 100", n)
		}
		rec.checkLatest(t, env, ns, want)
	})
	t.Run("expired continue", func(t *testing.T) {
		ns := env.Namespace(t, nil)
		createProfiles(t, env, ns, "u", 460, nil) // the first page: 460 unwanted, 40 wanted
		createProfiles(t, env, ns, "w", 100, nil)
		reqs := &profileRequests{failList: func(r *http.Request) bool { return r.URL.Query().Get("continue") != "" }}
		src, _ := newProfileSource(t, env, ns, wrapped(env, reqs))
		want := wantPrefix("w")
		rec := newHistoryRecorder(want)
		runProfileSource(t, src, rec)
		rec.checkLatest(t, env, ns, want)
		gets, lists := reqs.gets.Load(), reqs.lists.Load()
		t.Logf("%d GETs, %d LIST requests", gets, lists)
		if lists != 2 || gets < 60 || gets > 90 {
			t.Fatalf("%d GETs and %d LIST requests; want 2 (the second failing), and a GET of each of the 60 wanted profiles the first page did not have", gets, lists)
		}
	})
}
