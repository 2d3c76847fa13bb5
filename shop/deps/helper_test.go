package deps

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/brownout/brownout/internal/pipenet"
)

// pipeServer serves h on a pipenet.Listener; close stops the server (and the
// dependency, through stop) and the client's idle connections.
type pipeServer struct {
	*Server
	tr *http.Transport
}

func servePipe(h http.Handler, stop func()) *pipeServer {
	l := pipenet.New()
	// Host 127.0.0.1: the dependencies serve local clients only.
	return &pipeServer{Server: serve(l, "http://127.0.0.1", h, stop), tr: &http.Transport{DialContext: l.Dial}}
}

// client is an HTTP client on the pipe network with a timeout (0: none).
func (p *pipeServer) client(timeout time.Duration) *http.Client {
	return &http.Client{Transport: p.tr, Timeout: timeout}
}

func (p *pipeServer) close() {
	p.Server.Close()
	p.tr.CloseIdleConnections()
}

// serveRecorded calls h once, without a network, as a client on the
// same machine would (Host 127.0.0.1, a write typed application/json
// unless header says otherwise).
func serveRecorded(h http.Handler, method, path, body string, header ...string) *httptest.ResponseRecorder {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, path, rd)
	r.Host = "127.0.0.1"
	if method != http.MethodGet {
		r.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}
