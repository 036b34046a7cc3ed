package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/meridian-mesh/meridian/internal/quote"
)

func init() {
	register(&command{name: "ring", summary: "show the ring of destination replicas and the share each owns", run: runRing})
}

func runRing(ctx context.Context, args []string) error {
	fs := newFlagSet("ring")
	addr := fs.String("addr", "localhost:9996", "admin address of any destination replica")
	timeout := fs.Duration("timeout", 10*time.Second, "give up after this long")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if *timeout <= 0 {
		return fmt.Errorf("%w: --timeout %s: want a positive duration", errUsage, *timeout)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	url := "http://" + *addr + "/ring"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	first := &firstBytes{}
	client := &http.Client{Transport: &http.Transport{DialContext: first.dial}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		if first.http2() {
			return fmt.Errorf("%s answers in HTTP/2 only: this is the gRPC port; use the admin address (--addr host:9996)", *addr)
		}
		// net/http quotes the bytes ("malformed HTTP"), or, when they arrived before the
		// request was written, reports an unsolicited response: noise either way.
		if first.notHTTP() || strings.Contains(err.Error(), "malformed HTTP") {
			return fmt.Errorf("%s does not answer in HTTP/1 (is it a destination replica's admin address?)", *addr)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%s: no answer within %s (is it a destination replica's admin address?)", *addr, *timeout)
		}
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// The replica says why (e.g. "this replica runs without a ring").
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		reason := strings.TrimSpace(string(body))
		if reason == "" {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return fmt.Errorf("%s: %s: %s", url, resp.Status, quote.String(reason))
	}
	var st struct {
		Self     string `json:"self"`
		ID       string `json:"id"`
		Shape    string `json:"shape"`
		Services int    `json:"services"`
		Members  []struct {
			Name       string  `json:"name"`
			Addr       string  `json:"addr"`
			Partitions int     `json:"partitions"`
			Share      float64 `json:"share"`
			Services   int     `json:"services"`
		} `json:"members"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return fmt.Errorf("decode ring: %w", err)
	}
	fmt.Fprintf(stdout, "ring %s as seen by %s: %d members, %d services", st.ID, st.Self, len(st.Members), st.Services)
	if st.Shape != "" { // a replica of a version before shapes says none
		fmt.Fprintf(stdout, ", shape %s", quote.String(st.Shape))
	}
	fmt.Fprint(stdout, "\n\n")
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tADDRESS\tPARTITIONS\tSERVICES\tSHARE")
	for _, m := range st.Members {
		share := 0.0
		if st.Services > 0 {
			share = float64(m.Services) / float64(st.Services)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.1f%%\n", m.Name, m.Addr, m.Partitions, m.Services, 100*share)
	}
	return tw.Flush()
}

// firstBytes records the first bytes the server sends on the connections it dials, so that an
// answer that is not HTTP/1 can be recognised.
type firstBytes struct {
	mu  sync.Mutex
	buf []byte
}

func (f *firstBytes) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &recordingConn{Conn: c, f: f}, nil
}

// http2 reports whether the server began with an HTTP/2 frame header (a gRPC server sends
// its SETTINGS frame first): 3 bytes of length, then type 4 (SETTINGS) or 7 (GOAWAY).
func (f *firstBytes) http2() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.buf) >= 9 && !strings.HasPrefix(string(f.buf), "HTTP/") && (f.buf[3] == 0x4 || f.buf[3] == 0x7)
}

// notHTTP reports whether the server sent something that does not begin an HTTP/1 response.
func (f *firstBytes) notHTTP() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := min(len(f.buf), len("HTTP/"))
	return n > 0 && string(f.buf[:n]) != "HTTP/"[:n]
}

type recordingConn struct {
	net.Conn
	f *firstBytes
}

func (c *recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.f.mu.Lock()
	if need := 16 - len(c.f.buf); need > 0 {
		c.f.buf = append(c.f.buf, p[:min(n, need)]...)
	}
	c.f.mu.Unlock()
	return n, err
}
