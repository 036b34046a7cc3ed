package rawio

import (
	"context"
	"net"
)

// Dial dials addr with d and returns the connection wrapped (Wrap).
func Dial(ctx context.Context, d *net.Dialer, network, addr string) (net.Conn, error) {
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return Wrap(c), nil
}
