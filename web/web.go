package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// FS holds the page's files: index.html, dial.js, dial.css and vendor/.
//
//go:embed index.html dial.js dial.css vendor/*.js vendor/*.css
var FS embed.FS

// Page lists the files a browser loads for the page, in FS.
var Page = []string{"index.html", "dial.css", "dial.js", "vendor/uPlot-1.6.32.min.css", "vendor/uPlot-1.6.32.iife.min.js"}

// CSP is the page's Content-Security-Policy: its own origin only, no
// inline script or style, no framing.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// file is one served file, with its gzip form and ETag.
type file struct {
	name, ctype, etag string
	raw, gz           []byte
}

var files = func() map[string]*file {
	m := map[string]*file{}
	fs.WalkDir(FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := FS.ReadFile(p)
		sum := sha256.Sum256(b)
		f := &file{name: p, raw: b, etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`, ctype: ctype(p)}
		var z bytes.Buffer
		w, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
		w.Write(b)
		w.Close()
		f.gz = z.Bytes()
		m["/"+p] = f
		return nil
	})
	m["/"] = m["/index.html"]
	return m
}()

func ctype(p string) string {
	switch path.Ext(p) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	}
	return "application/octet-stream"
}

// GzipSize returns the compressed size of the page (the files of Page,
// gzip at best compression): what a browser downloads on a first visit.
func GzipSize() int {
	n := 0
	for _, p := range Page {
		n += len(files["/"+p].gz)
	}
	return n
}

// Handler serves the page at its root ("/" is index.html; "/dial.js",
// "/dial.css", "/vendor/…"), gzip when the client takes it, with ETags
// and the CSP; anything else is 404. Mount it under a prefix with
// http.StripPrefix, the prefix ending in a slash: the page's own files are
// relative, the API is at /v1/ on the same origin — or, for a page under
// /services/{name}/ (a daemon of several services), under that path.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		p := r.URL.Path
		if p == "" {
			p = "/"
		}
		f, ok := files[p]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", f.ctype)
		h.Set("Cache-Control", "no-cache") // revalidate: the ETag makes it cheap
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Vary", "Accept-Encoding")
		if strings.HasPrefix(f.ctype, "text/html") {
			h.Set("Content-Security-Policy", CSP)
		}
		body, etag := f.raw, f.etag
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			h.Set("Content-Encoding", "gzip")
			body, etag = f.gz, f.etag[:len(f.etag)-1]+`-gz"` // another representation, another tag
		}
		h.Set("ETag", etag)
		// ServeContent answers If-None-Match (304) and ranges.
		http.ServeContent(w, r, f.name, time.Time{}, bytes.NewReader(body))
	})
}
