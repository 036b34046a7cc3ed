package demo

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Terminal control sequences of the live view.
const (
	altScreenOn  = "\x1b[?1049h\x1b[?25l" // the alternate screen, cursor hidden
	altScreenOff = "\x1b[?25h\x1b[?1049l"
	home         = "\x1b[H"
	clearEOL     = "\x1b[K"
	clearEOS     = "\x1b[J"
)

// keysHelp is the KEYS line of a terminal.
const keysHelp = "k kill a destination replica   r restart it   d deny policy on/off   q quit"

// live shows the view until ctx ends or q is pressed: redrawn every Interval on a terminal,
// a summary every Summary otherwise.
func (m *mesh) live(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var keys <-chan byte
	if m.cfg.Terminal && m.cfg.Keys != nil {
		keys = m.cfg.Keys(ctx)
		defer func(keys <-chan byte) {
			cancel()
			for range keys { // the reader has put the terminal back when it closes
			}
		}(keys)
	}
	if m.cfg.Terminal {
		fmt.Fprint(m.cfg.Out, altScreenOn)
	} else {
		m.say("\nWhat to try while it runs:")
		for _, h := range m.hints(Model{}) {
			m.say("  - %s", h)
		}
		m.say("A summary follows every %s; Ctrl-C stops everything.", m.cfg.Summary)
	}
	var last Model
	defer func() {
		if m.cfg.Terminal {
			fmt.Fprint(m.cfg.Out, altScreenOff)
		}
		m.say("\nstopping: %d ok, %d denied, %d failed requests", int(last.Traffic.OK), int(last.Traffic.Denied), int(last.Traffic.Failed))
	}()
	tick := time.NewTicker(m.cfg.Interval)
	defer tick.Stop()
	lastSummary := time.Now()
	last = m.refresh(ctx)
	for {
		if m.cfg.Terminal {
			m.draw(last)
		} else if time.Since(lastSummary) >= m.cfg.Summary {
			lastSummary = time.Now()
			m.summary(last)
		}
		select {
		case <-ctx.Done():
			return nil
		case e := <-m.sup.Exits():
			if !e.Expected {
				m.event(fmt.Sprintf("%s (pid %d) exited: %v; its log: %s", e.Name, e.Pid, e.Err, m.sup.Proc(e.Name).LogPath()))
			}
			continue
		case k, ok := <-keys:
			if !ok {
				keys = nil
				continue
			}
			if m.key(k, last) {
				return nil
			}
		case <-tick.C:
		}
		last = m.refresh(ctx)
	}
}

// key acts on a keypress; true means quit.
func (m *mesh) key(k byte, last Model) (quit bool) {
	switch k {
	case 'q', 'Q', 3: // 3: Ctrl-C when the terminal does not turn it into a signal
		return true
	case 'k', 'K':
		if name := m.replicaToKill(last); name != "" {
			m.kill(name, last)
		} else {
			m.event("not killing the last live replica")
		}
	case 'r', 'R':
		m.restartReplicas()
	case 'd', 'D':
		if err := m.setDeny(!m.denyOn()); err != nil {
			m.event(err.Error())
		}
	}
	return false
}

// draw redraws the terminal in place, cut to its size so that nothing scrolls.
func (m *mesh) draw(model Model) {
	var b bytes.Buffer
	Render(&b, model, m.viewOptions(model, true))
	width, height := 0, 0
	if m.cfg.Size != nil {
		width, height = m.cfg.Size()
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if height > 1 && len(lines) > height-1 {
		lines = lines[:height-1]
	}
	var out strings.Builder
	out.WriteString(home)
	for _, l := range lines {
		out.WriteString(fitWidth(l, width))
		out.WriteString(clearEOL + "\n")
	}
	out.WriteString(clearEOS)
	fmt.Fprint(m.cfg.Out, out.String())
}

// fitWidth cuts a line with ANSI sequences to width visible runes (0: no limit).
func fitWidth(s string, width int) string {
	if width <= 0 {
		return s
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(s); {
		if s[i] == 0x1b { // an escape sequence: ESC [ ... final byte
			j := i + 1
			for j < len(s) && (j == i+1 || s[j] < 0x40 || s[j] > 0x7e) {
				j++
			}
			if j < len(s) {
				j++
			}
			b.WriteString(s[i:j])
			i = j
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if n >= width {
			b.WriteString(ansiReset)
			break
		}
		b.WriteRune(r)
		n++
		i += size
	}
	return b.String()
}

// summary prints the view once, without colour.
func (m *mesh) summary(model Model) {
	var b bytes.Buffer
	Render(&b, model, m.viewOptions(model, false))
	fmt.Fprintf(m.cfg.Out, "\n%s\n", b.String())
}

func (m *mesh) viewOptions(model Model, terminal bool) ViewOptions {
	o := ViewOptions{Color: terminal, Title: "Meridian local mesh"}
	if terminal {
		o.Keys, o.Hints = keysHelp, m.hints(model)
	}
	return o
}

// hints are the things to try, with the addresses and pids of this run.
func (m *mesh) hints(model Model) []string {
	// The owner's plaintext listener for tools (its gRPC address is mTLS).
	ownerAddr := "<the owner's local address>"
	for _, s := range model.Services {
		if s.Service == "shop/web" {
			for i := range m.cfg.Replicas {
				if ReplicaName(i) == s.Owner {
					ownerAddr = m.addrs.ReplicaLocal(i)
				}
			}
		}
	}
	var pids []string
	for i := range m.cfg.Replicas {
		if p := m.sup.Proc(ReplicaName(i)); p != nil {
			pids = append(pids, fmt.Sprintf("%s %d", p.Name(), p.Pid()))
		}
	}
	_, admin, _ := m.addrs.Replica(0)
	for i, r := range model.Ring.Rows {
		if r.Alive {
			_, admin, _ = m.addrs.Replica(i)
			break
		}
	}
	return []string{
		fmt.Sprintf("k, or kill -9 a replica (%s): its services move, failed stays 0; r restarts it", strings.Join(pids, ", ")),
		fmt.Sprintf("d, or cp %s/%s %s/%s: loadgen gets 403 from web, reports does not", m.dir, DenyPolicyOff, m.dir, DenyPolicy),
		fmt.Sprintf("edit %s/*.yaml (say ready: false on an endpoint): SERVICES follows", m.dir),
		fmt.Sprintf("bin/meridian ring --addr %s", admin),
		fmt.Sprintf("bin/meridian endpoints --addr %s --watch web.shop.svc.cluster.local:80", ownerAddr),
	}
}
