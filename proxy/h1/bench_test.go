package h1

import (
	"bufio"
	"bytes"
	"testing"
)

// BenchmarkRequestHead reads and parses a typical request head, and writes it as the proxy
// forwards it: nothing is allocated.
func BenchmarkRequestHead(b *testing.B) {
	raw := []byte("GET /api/items?page=2 HTTP/1.1\r\nHost: web.shop.svc.cluster.local:8080\r\nUser-Agent: curl/8.5.0\r\n" +
		"Accept: */*\r\nConnection: keep-alive\r\nX-Request-Id: 5d7e2c1a\r\n\r\n")
	src := bytes.NewReader(raw)
	br := bufio.NewReaderSize(src, 4<<10)
	var out bytes.Buffer
	bw := bufio.NewWriterSize(&out, 4<<10)
	var h Head
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		src.Reset(raw)
		br.Reset(src)
		if err := ReadHead(br, &h, 64<<10); err != nil {
			b.Fatal(err)
		}
		if err := h.ParseRequest(); err != nil {
			b.Fatal(err)
		}
		out.Reset()
		WriteRequestHead(bw, &h, h.Target, h.Host, nil)
		_ = bw.Flush()
	}
}
