package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"text/tabwriter"
	"time"
)

func init() {
	register(&command{name: "ring", summary: "show the ring of destination replicas and the share each owns", run: runRing})
}

func runRing(ctx context.Context, args []string) error {
	fs := newFlagSet("ring")
	addr := fs.String("addr", "localhost:9996", "admin address of any destination replica")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+*addr+"/ring", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s/ring: %s", *addr, resp.Status)
	}
	var st struct {
		Self     string `json:"self"`
		ID       string `json:"id"`
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
	fmt.Fprintf(stdout, "ring %s as seen by %s: %d members, %d services\n\n", st.ID, st.Self, len(st.Members), st.Services)
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
