package demo

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// The deny policy the demo ships disabled beside the example cluster, and the name it is
// enabled under: a Server for web's HTTP port that only billing's ServiceAccounts may call,
// so that loadgen's requests are refused with 403.
const (
	DenyPolicyOff = "web-deny.yaml.off"
	DenyPolicy    = "web-deny.yaml"
)

func (m *mesh) denyPath() string { return filepath.Join(m.dir, DenyPolicy) }

// setDeny enables (copies DenyPolicyOff to DenyPolicy, atomically) or disables (removes it)
// the deny policy in the directory the policy controller follows.
func (m *mesh) setDeny(on bool) error {
	if !on {
		if err := os.Remove(m.denyPath()); err != nil && !os.IsNotExist(err) {
			return err
		}
		m.mu.Lock()
		m.denied = false
		m.mu.Unlock()
		m.event("deny policy lifted: removed " + m.denyPath())
		return nil
	}
	b, err := os.ReadFile(filepath.Join(m.dir, DenyPolicyOff))
	if err != nil {
		return fmt.Errorf("the deny policy: %w", err)
	}
	if err := writeAtomic(m.denyPath(), b); err != nil {
		return err
	}
	m.mu.Lock()
	m.denied = true
	m.mu.Unlock()
	m.event("deny policy applied: " + m.denyPath() + " (only billing may call web)")
	return nil
}

// denyOn reports whether the deny policy is in the directory.
func (m *mesh) denyOn() bool {
	_, err := os.Stat(m.denyPath())
	return err == nil
}

// replicaToKill picks the live replica that owns the most of the services the traffic goes
// to (so that the kill moves them), never the last live one; "" when there is none to kill.
func (m *mesh) replicaToKill(model Model) string {
	var live []string
	for _, r := range model.Ring.Rows {
		if r.Alive {
			live = append(live, r.Name)
		}
	}
	if len(live) < 2 {
		return ""
	}
	targets := map[string]bool{}
	for _, r := range model.Routes {
		host, _, _ := strings.Cut(r.Authority, ":")
		parts := strings.Split(host, ".")
		if len(parts) >= 2 {
			targets[parts[1]+"/"+parts[0]] = true
		}
	}
	owned := map[string]int{}
	for _, s := range model.Services {
		if targets[s.Service] {
			owned[s.Owner]++
		}
	}
	best := live[0]
	for _, name := range live {
		if owned[name] > owned[best] {
			best = name
		}
	}
	return best
}

// kill ends a replica with SIGKILL, as a crash would.
func (m *mesh) kill(name string, model Model) {
	p := m.sup.Proc(name)
	if p == nil || !p.Alive() {
		return
	}
	var owned []string
	for _, s := range model.Services {
		if s.Owner == name && (len(owned) == 0 || owned[len(owned)-1] != s.Service) {
			owned = append(owned, s.Service)
		}
	}
	pid := p.Pid()
	p.Kill()
	m.event(fmt.Sprintf("killed %s (pid %d, SIGKILL); it owned %s", name, pid, orNone(owned)))
}

func orNone(ss []string) string {
	if len(ss) == 0 {
		return "no service"
	}
	return strings.Join(ss, ", ")
}

// restartReplicas starts again every replica that is down.
func (m *mesh) restartReplicas() {
	for i := range m.cfg.Replicas {
		p := m.sup.Proc(ReplicaName(i))
		if p == nil || p.Alive() {
			continue
		}
		if err := p.Restart(); err != nil {
			m.event(fmt.Sprintf("restart %s: %v", p.Name(), err))
			continue
		}
		m.event(fmt.Sprintf("restarted %s (pid %d)", p.Name(), p.Pid()))
	}
}

// loopbackRE finds the example cluster's pod addresses (127.0.x.y).
var loopbackRE = regexp.MustCompile(`\b127\.0\.(\d{1,3})\.(\d{1,3})\b`)

// copyExamples copies the example directory src into dst (files whose names start with "."
// left out), with the pod addresses 127.0.x.y turned into 127.net.x.y when net is not 0.
func copyExamples(src, dst string, net byte) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if rel != "." && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if net != 0 {
			b = loopbackRE.ReplaceAll(b, []byte(fmt.Sprintf("127.%d.$1.$2", net)))
		}
		return os.WriteFile(out, b, 0o644)
	})
}
