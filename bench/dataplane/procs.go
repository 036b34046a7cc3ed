package dataplane

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-mesh/meridian/internal/child"
)

// proc is a process the harness started: a control-plane component, a proxy or an nginx.
type proc struct{ *child.Proc }

// startProc starts bin with args and env (added to the harness's), its output in
// dir/NAME.log.
func startProc(name, dir, bin string, args, env []string) (*proc, error) {
	p, err := child.Start(name, bin, args, child.Options{
		Env:      append(append(os.Environ(), "GOTRACEBACK=all"), env...),
		Log:      filepath.Join(dir, name+".log"),
		Truncate: true,
	})
	if err != nil {
		return nil, err
	}
	return &proc{p}, nil
}

var adminClient = &http.Client{Timeout: 30 * time.Second}

// waitReady polls url until it answers 200, the process exits, or timeout passes.
func (p *proc) waitReady(ctx context.Context, url string, timeout time.Duration) error {
	return p.WaitHTTP(ctx, adminClient, url, timeout, "ready")
}

// memory is a process's resident memory, from /proc/PID/status, in bytes.
type memory struct {
	RSS, HWM uint64 // VmRSS, VmHWM (the peak)
	// Anon and File split RSS: anonymous memory (heap, stacks) and the pages of mapped
	// files (the executable's code and data, shared with every process running it).
	Anon, File uint64
}

// readMemory reads /proc/PID/status.
func readMemory(pid int) (memory, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return memory{}, err
	}
	defer f.Close()
	var m memory
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		var field *uint64
		switch name {
		case "VmRSS":
			field = &m.RSS
		case "VmHWM":
			field = &m.HWM
		case "RssAnon":
			field = &m.Anon
		case "RssFile":
			field = &m.File
		}
		if !ok || field == nil {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return memory{}, fmt.Errorf("/proc/%d/status %s: %w", pid, name, err)
		}
		*field = kb << 10
	}
	return m, sc.Err()
}

// children returns the pids of pid's children (nginx's workers).
func children(pid int) []int {
	s := strconv.Itoa(pid)
	b, err := os.ReadFile("/proc/" + s + "/task/" + s + "/children")
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// scrapeCounter reads one unlabelled sample (a counter such as go_memstats_mallocs_total)
// from a Prometheus text endpoint.
func scrapeCounter(ctx context.Context, url, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	res, err := adminClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: %s", url, res.Status)
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	prefix := name + " "
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", url, err)
	}
	return 0, fmt.Errorf("%s: no %s", url, name)
}

// saveProfile saves GET url (a pprof endpoint) to path.
func saveProfile(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := (&http.Client{Timeout: 5 * time.Minute}).Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, res.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, res.Body); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", url, err)
	}
	return f.Close()
}
