package main

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"

	"github.com/pendinguploads/pendinguploads/internal/app"
	"github.com/pendinguploads/pendinguploads/internal/httpapi"
	"github.com/pendinguploads/pendinguploads/internal/push"
	"github.com/pendinguploads/pendinguploads/internal/push/localbroker"
)

// startPush starts the dev server's MQTT broker (internal/push/localbroker:
// MQTT over WebSocket on loopback, the API's token check on connect and
// subscribe) on PUSH_PORT, by default the HTTP port + 1000 (9080 beside
// 8080, clear of a second make run's PORT=8081; 0 with PORT=0),
// points the store's hints and GET /uploads/limits' push at it, and says
// where it listens. Call it before the API serves.
func startPush(a *app.App, getenv func(string) string, httpAddr net.Addr, stdout io.Writer, log *slog.Logger) (stop func(), err error) {
	port := getenv("PUSH_PORT")
	if port == "" {
		port = "0"
		if tcp, ok := httpAddr.(*net.TCPAddr); ok && getenv("PORT") != "0" && tcp.Port+1000 <= 65535 {
			port = strconv.Itoa(tcp.Port + 1000)
		}
	}
	b, err := localbroker.Start(net.JoinHostPort("127.0.0.1", port), a.Store, log)
	if err != nil {
		return nil, startErrorf("PUSH_PORT", "%v; choose another: PUSH_PORT=%s make run", err, "18081")
	}
	a.Store.Notifier = &push.Hints{Publisher: b, Logger: log}
	a.API.Limits.Push = &httpapi.Push{URL: b.URL(), TopicTemplate: push.TopicTemplate}
	fmt.Fprintf(stdout, "Upload hints: an MQTT broker at %s (topic %s, the workspace token as password);\n"+
		"  ./pendingctl pull --dir inbox --watch   pulls each file within a second of its upload\n", b.URL(), push.TopicTemplate)
	return func() { _ = b.Close() }, nil
}
