package charttest

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// kubeAPIAccess is where the ServiceAccount admission plugin (off in kubetest) would mount
// the pod's token, the API server's CA and the namespace.
const kubeAPIAccess = "/var/run/secrets/kubernetes.io/serviceaccount"

// volumeFiles is the content of one volume: relative path -> data, with a mode each.
type volumeFiles map[string]volumeFile

type volumeFile struct {
	data []byte
	mode fs.FileMode
}

// prepareVolumes writes every volume of pod under dir/<name> and returns their directories.
func (k *Kubelet) prepareVolumes(ctx context.Context, pod *corev1.Pod, dir string) (map[string]string, error) {
	var fsGroup *int64
	if sc := pod.Spec.SecurityContext; sc != nil {
		fsGroup = sc.FSGroup
	}
	out := map[string]string{}
	vols := append([]corev1.Volume(nil), pod.Spec.Volumes...)
	if automount(pod) {
		vols = append(vols, k.kubeAPIAccessVolume())
	}
	for _, v := range vols {
		vdir := filepath.Join(dir, "volumes", v.Name)
		if err := os.MkdirAll(vdir, 0o755); err != nil {
			return nil, err
		}
		out[v.Name] = vdir
		if v.EmptyDir != nil {
			if err := os.Chmod(vdir, 0o777); err != nil {
				return nil, err
			}
			continue
		}
		files, err := k.volumeContent(ctx, pod, &v)
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
		if err := writeVolume(vdir, files, fsGroup); err != nil {
			return nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
	}
	return out, nil
}

func automount(pod *corev1.Pod) bool {
	return pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken
}

// kubeAPIAccessVolume is the projected volume the ServiceAccount admission plugin adds.
func (k *Kubelet) kubeAPIAccessVolume() corev1.Volume {
	return corev1.Volume{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To[int32](0o644),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
		},
	}}}
}

func (k *Kubelet) volumeContent(ctx context.Context, pod *corev1.Pod, v *corev1.Volume) (volumeFiles, error) {
	files := volumeFiles{}
	switch {
	case v.Secret != nil:
		return files, k.addSecret(ctx, pod.Namespace, v.Secret.SecretName, v.Secret.Items, modeOr(v.Secret.DefaultMode, 0o644), ptr.Deref(v.Secret.Optional, false), files)
	case v.ConfigMap != nil:
		return files, k.addConfigMap(ctx, pod.Namespace, v.ConfigMap.Name, v.ConfigMap.Items, modeOr(v.ConfigMap.DefaultMode, 0o644), ptr.Deref(v.ConfigMap.Optional, false), files)
	case v.DownwardAPI != nil:
		return files, addDownward(pod, v.DownwardAPI.Items, modeOr(v.DownwardAPI.DefaultMode, 0o644), files)
	case v.Projected != nil:
		mode := modeOr(v.Projected.DefaultMode, 0o644)
		for _, s := range v.Projected.Sources {
			var err error
			switch {
			case s.Secret != nil:
				err = k.addSecret(ctx, pod.Namespace, s.Secret.Name, s.Secret.Items, mode, ptr.Deref(s.Secret.Optional, false), files)
			case s.ConfigMap != nil:
				err = k.addConfigMap(ctx, pod.Namespace, s.ConfigMap.Name, s.ConfigMap.Items, mode, ptr.Deref(s.ConfigMap.Optional, false), files)
			case s.DownwardAPI != nil:
				err = addDownward(pod, s.DownwardAPI.Items, mode, files)
			case s.ServiceAccountToken != nil:
				err = k.addToken(ctx, pod, s.ServiceAccountToken, mode, files)
			default:
				err = fmt.Errorf("a projected source other than secret, configMap, downwardAPI and serviceAccountToken is not emulated")
			}
			if err != nil {
				return nil, err
			}
		}
		if v.Name == "kube-api-access" {
			files["ca.crt"] = volumeFile{data: k.caPEM, mode: mode}
		}
		return files, nil
	}
	return nil, fmt.Errorf("only secret, configMap, downwardAPI, projected and emptyDir volumes are emulated")
}

func modeOr(m *int32, def fs.FileMode) fs.FileMode {
	if m == nil {
		return def
	}
	return fs.FileMode(*m)
}

func itemsOf(data map[string][]byte, items []corev1.KeyToPath, mode fs.FileMode, files volumeFiles) error {
	if len(items) == 0 {
		for key, b := range data {
			files[key] = volumeFile{data: b, mode: mode}
		}
		return nil
	}
	for _, it := range items {
		b, ok := data[it.Key]
		if !ok {
			return fmt.Errorf("no key %q", it.Key)
		}
		files[it.Path] = volumeFile{data: b, mode: modeOr(it.Mode, mode)}
	}
	return nil
}

func (k *Kubelet) addSecret(ctx context.Context, ns, name string, items []corev1.KeyToPath, mode fs.FileMode, optional bool, files volumeFiles) error {
	s, err := k.kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	return addObjectKeys("secret", name, err, optional, func() error { return itemsOf(s.Data, items, mode, files) })
}

func (k *Kubelet) addConfigMap(ctx context.Context, ns, name string, items []corev1.KeyToPath, mode fs.FileMode, optional bool, files volumeFiles) error {
	c, err := k.kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	return addObjectKeys("ConfigMap", name, err, optional, func() error {
		data := map[string][]byte{}
		for key, v := range c.Data {
			data[key] = []byte(v)
		}
		for key, v := range c.BinaryData {
			data[key] = v
		}
		return itemsOf(data, items, mode, files)
	})
}

// addObjectKeys adds the keys of the Secret or ConfigMap (kind) name with add once the object
// was read; getErr is the error of reading it: an absent optional object adds nothing.
func addObjectKeys(kind, name string, getErr error, optional bool, add func() error) error {
	if apierrors.IsNotFound(getErr) && optional {
		return nil
	}
	err := getErr
	if err == nil {
		err = add()
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", kind, name, err)
	}
	return nil
}

func addDownward(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, mode fs.FileMode, files volumeFiles) error {
	for _, it := range items {
		var v string
		var err error
		switch {
		case it.FieldRef != nil:
			v, err = fieldValue(pod, it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			v, err = resourceValue(pod, it.ResourceFieldRef.ContainerName, it.ResourceFieldRef)
		}
		if err != nil {
			return err
		}
		files[it.Path] = volumeFile{data: []byte(v), mode: modeOr(it.Mode, mode)}
	}
	return nil
}

// addToken asks the TokenRequest API for a token of the pod's ServiceAccount bound to the
// pod, as the kubelet does for a projected serviceAccountToken.
func (k *Kubelet) addToken(ctx context.Context, pod *corev1.Pod, p *corev1.ServiceAccountTokenProjection, mode fs.FileMode, files volumeFiles) error {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	req := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(ptr.Deref(p.ExpirationSeconds, 3600)),
		BoundObjectRef:    &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if p.Audience != "" {
		req.Spec.Audiences = []string{p.Audience}
	}
	tr, err := k.kube.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("TokenRequest for ServiceAccount %s/%s: %w", pod.Namespace, sa, err)
	}
	files[p.Path] = volumeFile{data: []byte(tr.Status.Token), mode: mode}
	return nil
}

// writeVolume writes files into dir. With an fsGroup, as a kubelet does for these read-only
// volumes, every file and directory belongs to the group, files gain group read and
// directories group read, search and setgid.
func writeVolume(dir string, files volumeFiles, fsGroup *int64) error {
	for rel, f := range files {
		if strings.Contains(rel, "..") || filepath.IsAbs(rel) {
			return fmt.Errorf("path %q leaves the volume", rel)
		}
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		mode := f.mode.Perm()
		if fsGroup != nil {
			mode |= 0o440
		}
		if err := os.WriteFile(p, f.data, mode); err != nil {
			return err
		}
		if err := os.Chmod(p, mode); err != nil { // WriteFile's mode is masked by the umask
			return err
		}
	}
	if fsGroup == nil {
		return nil
	}
	gid := int(*fsGroup)
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(p, 0, gid); err != nil {
			return err
		}
		if d.IsDir() {
			return os.Chmod(p, 0o755|fs.ModeSetgid)
		}
		return nil
	})
}
