package outbound

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"time"
)

// switchProtocols completes an HTTP/1.1 upgrade (WebSocket and the like) the upstream
// accepted with 101: it takes over the client connection, writes the 101 response and
// copies both ways between the client and the upgraded upstream connection.
func (o *Outbound) switchProtocols(w http.ResponseWriter, req *http.Request, res *http.Response, upgrade string, ep *endpoint, start time.Time) {
	up, ok := res.Body.(io.ReadWriteCloser)
	if !ok || upgrade == "" || !strings.EqualFold(res.Header.Get("Upgrade"), upgrade) {
		_ = res.Body.Close()
		ep.route.Response(http.StatusBadGateway, "", true, time.Since(start))
		proxyError(w, req, http.StatusBadGateway, "upstream switched to a protocol the client did not ask for")
		return
	}
	switched := func(bw *bufio.Writer) error {
		ep.route.Response(res.StatusCode, "", false, time.Since(start))
		return write101(bw, res.Header, upgrade)
	}
	if !o.tunnel(w, up, switched) {
		ep.route.Response(http.StatusInternalServerError, "", true, time.Since(start))
	}
}

// write101 writes the upstream's 101 response without its hop-by-hop headers, but with the
// Connection and Upgrade that make it an upgrade.
func write101(bw *bufio.Writer, h http.Header, upgrade string) error {
	removeHopByHop(h)
	h["Connection"] = []string{"Upgrade"}
	h["Upgrade"] = []string{upgrade}
	if _, err := bw.WriteString("HTTP/1.1 101 Switching Protocols\r\n"); err != nil {
		return err
	}
	if err := h.Write(bw); err != nil {
		return err
	}
	if _, err := bw.WriteString("\r\n"); err != nil {
		return err
	}
	return bw.Flush()
}
