package shop

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"io/fs"
	"net/http"
	"path"
	"time"
)

// staticFS holds the storefront's script and the OpenFeature web SDK
// with its OFREP web provider, vendored from npm (static/vendor/VERSIONS
// says which files of which versions; their licence is
// static/vendor/openfeature-LICENSE).
//
//go:embed static/storefront.js static/vendor/*.js
var staticFS embed.FS

// staticFile is one served file with its ETag.
type staticFile struct {
	name, etag string
	body       []byte
}

// staticFiles are staticFS's files by URL path (/static/…).
var staticFiles = func() map[string]staticFile {
	m := map[string]staticFile{}
	fs.WalkDir(staticFS, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := staticFS.ReadFile(p)
		sum := sha256.Sum256(b)
		m["/"+p] = staticFile{name: path.Base(p), etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`, body: b}
		return nil
	})
	return m
}()

// static serves the storefront's scripts at /static/… (GET and HEAD): as
// JavaScript (module scripts need its type), with an ETag over the
// content and no-cache, so that a browser revalidates them cheaply (304)
// and never runs a stale copy after an upgrade. Anything else is 404.
func static(w http.ResponseWriter, r *http.Request) {
	f, ok := staticFiles[r.URL.Path]
	if !ok {
		problem(w, http.StatusNotFound, "not-found", "no such file: "+r.URL.Path)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/javascript; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("ETag", f.etag)
	http.ServeContent(w, r, f.name, time.Time{}, bytes.NewReader(f.body))
}
