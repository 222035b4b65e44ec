package main

import (
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The example page (examples/upload.html) and the browser client it
// imports (clients/js/pendinguploads.js and the modules beside it) are
// served read-only from the repository, on a loopback port of their own:
// a second origin beside the API's, as the canvas on a sibling host is,
// so the page goes through the service's CORS and the bucket's as the
// canvas does. Nothing else of the repository is served, and the API's
// own port serves only the API.

// examplePage is the page the banner prints, under the repository root.
const examplePage = "examples/upload.html"

// exampleDirs are the folders served: the files directly in each, no
// subfolder (clients/js/node_modules stays out).
var exampleDirs = []string{"examples", "clients/js"}

// examplesPortOffset puts the page on 8180 beside an API on 8080: clear
// of the ports a second dev server is told to take (PORT=8081).
const examplesPortOffset = 100

// examplesRoot is the repository root holding the example page, found
// from the working directory upward (make run runs at the root); "" when
// there is none (a dev server built and run elsewhere serves no page).
func examplesRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(examplePage))); err == nil && fi.Mode().IsRegular() {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return dir
			}
		}
		up := filepath.Dir(dir)
		if up == dir {
			return ""
		}
		dir = up
	}
}

// listenExamples listens for the example page on 127.0.0.1:
// EXAMPLES_PORT when set (off: no page; a port that is taken is a start
// error naming it), else the API's port + examplesPortOffset when that is
// free, else any free port. It returns a nil listener for no page.
func listenExamples(getenv func(string) string, apiAddr net.Addr) (net.Listener, error) {
	switch port := getenv("EXAMPLES_PORT"); {
	case port == "off":
		return nil, nil
	case port != "":
		if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			return nil, startErrorf("EXAMPLES_PORT", "want a port number (or off), got %q", port)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, startErrorf("EXAMPLES_PORT", "port %s is taken: choose another (EXAMPLES_PORT=0 takes any free one), or EXAMPLES_PORT=off", port)
		}
		if err != nil {
			return nil, startErrorf("EXAMPLES_PORT", "cannot listen on 127.0.0.1:%s: %v", port, err)
		}
		return ln, nil
	}
	if tcp, ok := apiAddr.(*net.TCPAddr); ok && tcp.Port > 0 && tcp.Port+examplesPortOffset <= 65535 {
		if ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(tcp.Port+examplesPortOffset))); err == nil {
			return ln, nil
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, startErrorf("EXAMPLES_PORT", "cannot listen on a loopback port for the example page: %v (EXAMPLES_PORT=off serves none)", err)
	}
	return ln, nil
}

// examplesHandler serves the files directly in root's exampleDirs, GET
// and HEAD only, never cached; / goes to the example page.
func examplesHandler(root string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == "/" {
			http.Redirect(w, r, "/"+examplePage, http.StatusFound)
			return
		}
		dir, name := filepath.Split(strings.TrimPrefix(r.URL.Path, "/"))
		served := false
		for _, d := range exampleDirs {
			served = served || dir == d+"/"
		}
		if !served || name == "" || strings.HasPrefix(name, ".") {
			http.NotFound(w, r)
			return
		}
		path := filepath.Join(root, filepath.FromSlash(dir), name)
		fi, err := os.Stat(path)
		if err != nil || !fi.Mode().IsRegular() {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		http.ServeFile(w, r, path)
	})
}

// exampleServer is the page's server, bounded like the API's.
func exampleServer(root string) *http.Server {
	return &http.Server{
		Handler:           examplesHandler(root),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		WriteTimeout:      time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}

// pageOrigin is the origin a browser sees the page's listener as.
func pageOrigin(ln net.Listener) string {
	return "http://" + ln.Addr().String()
}

// listsOrigin tells whether the comma-separated origins list origin.
func listsOrigin(origins, origin string) bool {
	for _, o := range strings.Split(origins, ",") {
		if strings.TrimSpace(o) == origin {
			return true
		}
	}
	return false
}
