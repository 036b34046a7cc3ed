package demo

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// echoServer answers every line with its name and the line.
func echoServer(t *testing.T, name string) string {
	l := testutil.Listen(t)
	testutil.Go(t, "echo "+name, func(ctx context.Context) error {
		context.AfterFunc(ctx, func() { l.Close() })
		for {
			c, err := l.Accept()
			if err != nil {
				return nil
			}
			go func() {
				defer c.Close()
				context.AfterFunc(ctx, func() { c.Close() })
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					fmt.Fprintf(c, "%s %s\n", name, sc.Text())
				}
			}()
		}
	})
	return l.Addr().String()
}

func TestForwarderSkipsDeadReplicas(t *testing.T) {
	a, b := echoServer(t, "a"), echoServer(t, "b")
	var backends atomic.Pointer[[]string]
	backends.Store(&[]string{"127.0.0.1:1", a, b}) // :1 refuses, as a killed replica's port does
	f, err := NewForwarder("127.0.0.1:0", func() []string { return *backends.Load() }, nil)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Go(t, "the forwarder", f.Run)
	ask := func() string {
		c, err := net.DialTimeout("tcp", f.Addr(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "hi\n")
		line, _ := bufio.NewReader(c).ReadString('\n')
		return line
	}
	seen := map[string]bool{}
	for range 6 {
		seen[ask()] = true
	}
	if !seen["a hi\n"] || !seen["b hi\n"] || len(seen) != 2 {
		t.Errorf("answers %v, want a and b in turn, never the dead replica", seen)
	}
	backends.Store(&[]string{})
	c, err := net.Dial("tcp", f.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("with no replica the connection was not closed: %d %v", n, err)
	}
}
