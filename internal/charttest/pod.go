package charttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

const templateHashAnnotation = "charttest.meridian.io/template-hash"

// pod is a pod the stand-in runs.
type pod struct {
	name, owner  string
	templateHash string
	ip           string
	obj          *corev1.Pod
	containers   []*container
	ready        atomic.Bool // the Ready condition last written
}

// container is one running container process.
type container struct {
	spec    corev1.Container
	logPath string
	proc    *os.Process
	done    chan struct{} // closed when the process has exited
	exitErr error         // set before done is closed
	// ready and live are the last probe results (written by the prober).
	ready, live atomic.Bool
}

func templateHash(tpl *corev1.PodTemplateSpec) string {
	b, _ := json.Marshal(tpl)
	return hex64(fnv(string(b)))
}

// ensurePod creates and starts pod name of an owner from tpl unless it runs already; it fails
// t when a running pod's template differs from tpl.
func (k *Kubelet) ensurePod(ctx context.Context, t *testing.T, kind, owner string, uid types.UID, name string, tpl *corev1.PodTemplateSpec, custom func(*corev1.Pod)) {
	t.Helper()
	hash := templateHash(tpl)
	k.mu.Lock()
	existing := k.pods[name]
	k.mu.Unlock()
	if existing != nil {
		if existing.templateHash != hash {
			t.Fatalf("the pod template of %s %s changed; the stand-in kubelet does not emulate rolling updates", kind, owner)
		}
		return
	}
	obj := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: k.cfg.Namespace, Labels: map[string]string{}, Annotations: map[string]string{},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: owner, UID: uid, Controller: ptr.To(true)}},
		},
		Spec: *tpl.Spec.DeepCopy(),
	}
	for k, v := range tpl.Labels {
		obj.Labels[k] = v
	}
	for k, v := range tpl.Annotations {
		obj.Annotations[k] = v
	}
	obj.Annotations[templateHashAnnotation] = hash
	obj.Spec.NodeName = "charttest"
	custom(obj)
	if err := k.checkSupported(obj); err != nil {
		t.Fatalf("pod %s: %v", name, err)
	}
	k.mu.Lock()
	k.nextIP++
	ip := k.addr(byte(9 + k.nextIP))
	k.mu.Unlock()
	created, err := k.kube.CoreV1().Pods(k.cfg.Namespace).Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	now := metav1.Now()
	created.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: ip.String(), PodIPs: []corev1.PodIP{{IP: ip.String()}},
		HostIP: "127.0.0.1", HostIPs: []corev1.HostIP{{IP: "127.0.0.1"}}, StartTime: &now,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: now},
		},
	}
	if created, err = k.kube.CoreV1().Pods(k.cfg.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("pod %s status: %v", name, err)
	}
	p := &pod{name: name, owner: kind + "/" + owner, templateHash: hash, ip: ip.String(), obj: created}
	dir := filepath.Join(k.dir, name)
	vols, err := k.prepareVolumes(ctx, created, dir)
	if err != nil {
		t.Fatalf("pod %s: %v", name, err)
	}
	for i := range created.Spec.Containers {
		c, err := k.startContainer(created, &created.Spec.Containers[i], dir, vols)
		if err != nil {
			p.stopAll(t)
			t.Fatalf("pod %s container %s: %v", name, created.Spec.Containers[i].Name, err)
		}
		p.containers = append(p.containers, c)
	}
	k.mu.Lock()
	k.pods[name] = p
	k.mu.Unlock()
}

// checkSupported refuses what the stand-in does not emulate, rather than run something else.
func (k *Kubelet) checkSupported(p *corev1.Pod) error {
	switch {
	case len(p.Spec.InitContainers) > 0:
		return errors.New("init containers are not emulated")
	case p.Spec.HostNetwork:
		return errors.New("hostNetwork is not emulated")
	case p.Spec.EnableServiceLinks == nil || *p.Spec.EnableServiceLinks:
		return errors.New("service links (enableServiceLinks) are not emulated; set enableServiceLinks: false")
	}
	for _, c := range p.Spec.Containers {
		if name, _, _ := strings.Cut(c.Image, ":"); name != k.cfg.Image {
			return fmt.Errorf("container %s: image %s is not %s, the only image whose entrypoint the stand-in knows", c.Name, c.Image, k.cfg.Image)
		}
		if _, err := k.program(p, &c); err != nil {
			return fmt.Errorf("container %s: %w", c.Name, err)
		}
	}
	return nil
}

// program is the binary that container c of pod p runs: Binary for the image's entrypoint
// and for a meridian command; ProxyBinary for meridian-proxy, which only the injected proxy
// (the container linkerd-proxy of a pod outside the control plane) may run.
func (k *Kubelet) program(p *corev1.Pod, c *corev1.Container) (string, error) {
	if len(c.Command) == 0 || isProgram(c.Command[0], "meridian") {
		return k.cfg.Binary, nil
	}
	switch {
	case !isProgram(c.Command[0], "meridian-proxy"):
		return "", fmt.Errorf("command %q is not meridian", c.Command[0])
	case p.Labels[controlPlaneComponentLabel] != "":
		return "", fmt.Errorf("command %q in a control-plane pod (%s), which runs meridian", c.Command[0], p.Labels[controlPlaneComponentLabel])
	case c.Name != injectedProxyName:
		return "", fmt.Errorf("command %q outside the injected proxy container %s", c.Command[0], injectedProxyName)
	case k.cfg.ProxyBinary == "":
		return "", fmt.Errorf("command %q, and no ProxyBinary given", c.Command[0])
	}
	return k.cfg.ProxyBinary, nil
}

const (
	controlPlaneComponentLabel = "linkerd.io/control-plane-component"
	injectedProxyName          = "linkerd-proxy"
)

// isProgram reports whether a container's command names the program name (by itself or as
// a path's last element).
func isProgram(cmd, name string) bool { return cmd == name || strings.HasSuffix(cmd, "/"+name) }

// startContainer starts c of pod as a process (through the pod init, see runPodInit).
func (k *Kubelet) startContainer(pod *corev1.Pod, c *corev1.Container, dir string, vols map[string]string) (*container, error) {
	env, err := k.containerEnv(pod, c)
	if err != nil {
		return nil, err
	}
	bin, err := k.program(pod, c)
	if err != nil {
		return nil, err
	}
	lookup := env.get
	argv := []string{bin}
	if len(c.Command) > 1 {
		for _, a := range c.Command[1:] {
			argv = append(argv, expand(a, lookup))
		}
	}
	for _, a := range c.Args {
		argv = append(argv, expand(a, lookup))
	}
	in := podInit{Binary: bin, Argv: argv, Env: env.list(), Dir: c.WorkingDir, ResolvConf: k.resolvConf(pod.Namespace)}
	mountedAPI := false
	for _, m := range c.VolumeMounts {
		src, ok := vols[m.Name]
		if !ok {
			return nil, fmt.Errorf("volumeMount %s: no volume %s", m.MountPath, m.Name)
		}
		if m.SubPath != "" {
			src = filepath.Join(src, m.SubPath)
		}
		in.Mounts = append(in.Mounts, bindMount{Source: src, Target: m.MountPath, ReadOnly: m.ReadOnly})
		mountedAPI = mountedAPI || m.MountPath == kubeAPIAccess
	}
	if src, ok := vols["kube-api-access"]; ok && !mountedAPI {
		in.Mounts = append(in.Mounts, bindMount{Source: src, Target: kubeAPIAccess, ReadOnly: true})
	}
	if err := credentials(pod, c, &in); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	spec := filepath.Join(dir, c.Name+".init.json")
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(spec, b, 0o600); err != nil {
		return nil, err
	}
	cmd, err := podCommand(spec)
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, c.Name+".log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close() // the child has its own descriptor
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	ct := &container{spec: *c, logPath: logPath, proc: cmd.Process, done: make(chan struct{})}
	go func() { // owned by ct: stop waits for done
		ct.exitErr = cmd.Wait()
		close(ct.done)
	}()
	return ct, nil
}

// containerEnv is the container's environment: what a kubelet sets, then envFrom, then env
// with the downward API filled in and $(VAR) expanded.
func (k *Kubelet) containerEnv(pod *corev1.Pod, c *corev1.Container) (*envLookup, error) {
	e := &envLookup{vars: map[string]string{}}
	e.set("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	e.set("HOSTNAME", ptrOr(pod.Spec.Hostname, pod.Name))
	e.set("KUBERNETES_SERVICE_HOST", k.apiHost)
	e.set("KUBERNETES_SERVICE_PORT", k.apiPort)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, from := range c.EnvFrom {
		var data map[string]string
		switch {
		case from.ConfigMapRef != nil:
			cm, err := k.kube.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, from.ConfigMapRef.Name, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("envFrom ConfigMap %s: %w", from.ConfigMapRef.Name, err)
			}
			data = cm.Data
		case from.SecretRef != nil:
			s, err := k.kube.CoreV1().Secrets(pod.Namespace).Get(ctx, from.SecretRef.Name, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("envFrom Secret %s: %w", from.SecretRef.Name, err)
			}
			data = map[string]string{}
			for key, v := range s.Data {
				data[key] = string(v)
			}
		}
		for key, v := range data {
			e.set(from.Prefix+key, v)
		}
	}
	for _, v := range c.Env {
		val, err := k.envValue(ctx, pod, c, &v, e)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", v.Name, err)
		}
		e.set(v.Name, val)
	}
	return e, nil
}

func (k *Kubelet) envValue(ctx context.Context, pod *corev1.Pod, c *corev1.Container, v *corev1.EnvVar, e *envLookup) (string, error) {
	if v.ValueFrom == nil {
		return expand(v.Value, e.get), nil
	}
	switch from := v.ValueFrom; {
	case from.FieldRef != nil:
		return fieldValue(pod, from.FieldRef.FieldPath)
	case from.ResourceFieldRef != nil:
		return resourceValue(pod, c.Name, from.ResourceFieldRef)
	case from.ConfigMapKeyRef != nil:
		cm, err := k.kube.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, from.ConfigMapKeyRef.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return cm.Data[from.ConfigMapKeyRef.Key], nil
	case from.SecretKeyRef != nil:
		s, err := k.kube.CoreV1().Secrets(pod.Namespace).Get(ctx, from.SecretKeyRef.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return string(s.Data[from.SecretKeyRef.Key]), nil
	}
	return "", errors.New("valueFrom not emulated")
}

func ptrOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// credentials sets the user, groups and no_new_privs of the container's process from the pod's
// and the container's securityContext.
func credentials(pod *corev1.Pod, c *corev1.Container, in *podInit) error {
	var uid, gid *int64
	var groups []int
	nonRoot := false
	if sc := pod.Spec.SecurityContext; sc != nil {
		uid, gid = sc.RunAsUser, sc.RunAsGroup
		nonRoot = ptr.Deref(sc.RunAsNonRoot, false)
		if sc.FSGroup != nil {
			groups = append(groups, int(*sc.FSGroup))
		}
		for _, g := range sc.SupplementalGroups {
			groups = append(groups, int(g))
		}
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = sc.RunAsGroup
		}
		if sc.RunAsNonRoot != nil {
			nonRoot = *sc.RunAsNonRoot
		}
		in.ReadOnlyRoot = ptr.Deref(sc.ReadOnlyRootFilesystem, false)
		in.NoNewPrivs = sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation
	}
	if uid == nil {
		if nonRoot {
			return errors.New("runAsNonRoot without runAsUser: the image's user is unknown to the stand-in")
		}
		uid = ptr.To[int64](0)
	}
	if nonRoot && *uid == 0 {
		return errors.New("runAsNonRoot with runAsUser 0")
	}
	if gid == nil {
		gid = ptr.To[int64](0)
	}
	in.UID, in.GID, in.Groups = int(*uid), int(*gid), groups
	return nil
}

// stopAll stops the pod's processes: SIGTERM, then SIGKILL after the grace period (at most
// 10 s), waiting for each to exit.
func (p *pod) stopAll(t *testing.T) {
	grace := 10 * time.Second
	if g := p.obj.Spec.TerminationGracePeriodSeconds; g != nil && time.Duration(*g)*time.Second < grace {
		grace = time.Duration(*g) * time.Second
	}
	for _, c := range p.containers {
		_ = syscall.Kill(-c.proc.Pid, syscall.SIGTERM)
	}
	for _, c := range p.containers {
		select {
		case <-c.done:
			continue
		case <-time.After(grace):
		}
		_ = syscall.Kill(-c.proc.Pid, syscall.SIGKILL)
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			t.Errorf("pod %s container %s (pid %d) did not exit after SIGKILL", p.name, c.spec.Name, c.proc.Pid)
		}
	}
}

// exited reports whether the container's process has ended.
func (c *container) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// setReady writes the pod's Ready and ContainersReady conditions and its container statuses.
func (k *Kubelet) setReady(ctx context.Context, p *pod, ready bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := k.kube.CoreV1().Pods(k.cfg.Namespace).Get(ctx, p.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		now := metav1.Now()
		for i := range cur.Status.Conditions {
			c := &cur.Status.Conditions[i]
			if (c.Type == corev1.PodReady || c.Type == corev1.ContainersReady) && c.Status != st {
				c.Status, c.LastTransitionTime = st, now
			}
		}
		cur.Status.ContainerStatuses = nil
		for _, c := range p.containers {
			cs := corev1.ContainerStatus{Name: c.spec.Name, Image: c.spec.Image, Ready: c.ready.Load(), Started: ptr.To(!c.exited())}
			if c.exited() {
				cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: exitCode(c.exitErr), Reason: "Error", FinishedAt: now}
			} else {
				cs.State.Running = &corev1.ContainerStateRunning{StartedAt: *p.obj.Status.StartTime}
			}
			cur.Status.ContainerStatuses = append(cur.Status.ContainerStatuses, cs)
		}
		_, err = k.kube.CoreV1().Pods(k.cfg.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

func exitCode(err error) int32 {
	var ee interface{ ExitCode() int }
	if errors.As(err, &ee) {
		return int32(ee.ExitCode())
	}
	return 0
}
