package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// MaxPageGzip is the page's weight budget: HTML, JS and CSS, compressed.
const MaxPageGzip = 150 << 10

func TestPageWeight(t *testing.T) {
	n := GzipSize()
	t.Logf("page weight: %d bytes gzip (%.1f kB) for %v; budget %d kB", n, float64(n)/1024, Page, MaxPageGzip>>10)
	assert.LessOrEqual(t, n, MaxPageGzip, "the page is over its weight budget")
	raw := 0
	for _, p := range Page {
		b, err := FS.ReadFile(p)
		require.NoError(t, err, "every file of Page is embedded")
		raw += len(b)
	}
	t.Logf("uncompressed: %d bytes", raw)
}

func TestHandler(t *testing.T) {
	srv := httptest.NewServer(http.StripPrefix("/dial", Handler()))
	defer srv.Close()
	get := func(path, enc, etag string) *http.Response {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.Header.Set("Accept-Encoding", enc) // set: the transport does not decompress
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		resp, err := http.DefaultTransport.RoundTrip(req)
		require.NoError(t, err)
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	for _, tc := range []struct{ path, ctype string }{
		{"/dial/", "text/html; charset=utf-8"},
		{"/dial/index.html", "text/html; charset=utf-8"},
		{"/dial/dial.js", "text/javascript; charset=utf-8"},
		{"/dial/dial.css", "text/css; charset=utf-8"},
		{"/dial/vendor/uPlot-1.6.32.iife.min.js", "text/javascript; charset=utf-8"},
	} {
		resp := get(tc.path, "identity", "")
		assert.Equal(t, 200, resp.StatusCode, tc.path)
		assert.Equal(t, tc.ctype, resp.Header.Get("Content-Type"), tc.path)
		assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), tc.path)
		assert.Empty(t, resp.Header.Get("Content-Encoding"), tc.path)
	}
	html := get("/dial/", "identity", "")
	assert.Equal(t, CSP, html.Header.Get("Content-Security-Policy"))

	gz := get("/dial/dial.js", "gzip, br", "")
	assert.Equal(t, "gzip", gz.Header.Get("Content-Encoding"))
	tag := gz.Header.Get("ETag")
	assert.NotEqual(t, tag, get("/dial/dial.js", "identity", "").Header.Get("ETag"), "each encoding has its own tag")
	assert.Equal(t, http.StatusNotModified, get("/dial/dial.js", "gzip", tag).StatusCode)

	for _, p := range []string{"/dial/nope", "/dial/vendor/", "/dial/web.go", "/dial/doc.go"} {
		assert.Equal(t, 404, get(p, "", "").StatusCode, p)
	}
	req, _ := http.NewRequest("POST", srv.URL+"/dial/", nil)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

// TestNoHTMLFromData: the script never parses text as HTML, and the page
// loads nothing from another origin.
func TestNoHTMLFromData(t *testing.T) {
	js, err := FS.ReadFile("dial.js")
	require.NoError(t, err)
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "setAttribute('on", "srcdoc"} {
		assert.NotContains(t, string(js), bad)
	}
	url := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	for _, p := range []string{"index.html", "dial.js", "dial.css"} {
		b, err := FS.ReadFile(p)
		require.NoError(t, err)
		s := strings.ReplaceAll(string(b), "http://www.w3.org/2000/svg", "") // a namespace, not a load
		assert.Empty(t, url.FindAllString(s, -1), "%s loads nothing from elsewhere", p)
	}
}

func TestVendored(t *testing.T) {
	b, err := os.ReadFile("vendor/VERSIONS")
	require.NoError(t, err)
	assert.Contains(t, string(b), "uplot 1.6.32")
	lic, err := os.ReadFile("vendor/uPlot-LICENSE")
	require.NoError(t, err)
	assert.Contains(t, string(lic), "MIT License")
	f, err := FS.Open("vendor/uPlot-1.6.32.iife.min.js")
	require.NoError(t, err)
	head := make([]byte, 200)
	n, _ := io.ReadFull(f, head)
	f.Close()
	assert.Contains(t, string(head[:n]), "uPlot", "the file is uPlot's build")
}
