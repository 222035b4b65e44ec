package localbroker

import (
	"errors"
	"io"
	"net"
	"net/http"

	"github.com/gorilla/websocket"
)

// upgrader takes MQTT's WebSocket subprotocol; the broker listens on
// loopback for make run and tests, so any Origin is accepted.
var upgrader = websocket.Upgrader{
	Subprotocols: []string{"mqtt"},
	CheckOrigin:  func(*http.Request) bool { return true },
}

// wsConn is a WebSocket connection as the net.Conn an MQTT broker reads:
// the bytes of consecutive binary messages.
type wsConn struct {
	net.Conn
	c *websocket.Conn
	r io.Reader // the current message, nil between messages
}

func newWSConn(c *websocket.Conn) *wsConn { return &wsConn{Conn: c.UnderlyingConn(), c: c} }

var errNotBinary = errors.New("push broker: a WebSocket message that is not binary")

func (w *wsConn) Read(p []byte) (int, error) {
	for {
		if w.r == nil {
			op, r, err := w.c.NextReader()
			if err != nil {
				return 0, err
			}
			if op != websocket.BinaryMessage {
				return 0, errNotBinary
			}
			w.r = r
		}
		n, err := w.r.Read(p)
		if errors.Is(err, io.EOF) {
			w.r = nil
			err = nil
		}
		if n > 0 || err != nil {
			return n, err
		}
	}
}

func (w *wsConn) Write(p []byte) (int, error) {
	if err := w.c.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (w *wsConn) Close() error { return w.c.Close() }
