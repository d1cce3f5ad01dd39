package top

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"time"
)

//go:embed page.html page.css page.js
var assets embed.FS

var page = template.Must(template.New("page.html").Funcs(template.FuncMap{
	"dur":   fmtMS,
	"clock": func(t time.Time) string { return t.Format("15:04:05") },
	"pct":   pct,
	"secs":  func(ms int64) string { return fmt.Sprintf("%.3fs", float64(ms)/1000) },
	"deref": func(t *time.Time) time.Time { return *t },
}).ParseFS(assets, "page.html"))

// Page serves the live view of a Watcher over HTTP:
//
//	GET  /             the page (a snapshot that updates itself; ?name=GLOB&holder=TEXT filter it)
//	GET  /api/locks    the same data as JSON (the same filters)
//	GET  /events       server-sent events: the page's view after each reading
//	POST /api/unlock   name=NAME&confirm=NAME force-unlocks NAME (only with Unlock set,
//	                   and the header X-Dlock-Unlock: 1, which the page's script sends)
type Page struct {
	Watcher *Watcher
	// Backend and Server name the lock service in the page's header.
	Backend, Server string
	// UnlockCommand returns the `dlock unlock --force` line for a lock
	// (nil: none on this service).
	UnlockCommand func(name string) string
	// Unlock force-unlocks a lock and says what it removed (nil: the page
	// does not unlock; --allow-unlock sets it).
	Unlock func(ctx context.Context, name string) (string, error)
}

// Handler returns the page's HTTP handler.
func (p *Page) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, ".")
	mux.Handle("GET /page.css", http.FileServerFS(static))
	mux.Handle("GET /page.js", http.FileServerFS(static))
	mux.HandleFunc("GET /{$}", p.serveIndex)
	mux.HandleFunc("GET /api/locks", p.serveJSON)
	mux.HandleFunc("GET /events", p.serveEvents)
	mux.HandleFunc("POST /api/unlock", p.serveUnlock)
	return mux
}

// view returns the Watcher's view for the filters of r.
func (p *Page) view(r *http.Request) View {
	f := Filter{Name: r.URL.Query().Get("name"), Holder: r.URL.Query().Get("holder")}
	v := p.Watcher.View(f, p.UnlockCommand)
	v.Backend, v.Server, v.Unlock = p.Backend, p.Server, p.Unlock != nil
	return v
}

func (p *Page) serveIndex(w http.ResponseWriter, r *http.Request) {
	var b bytes.Buffer
	if err := page.Execute(&b, p.view(r)); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b.Bytes())
}

func (p *Page) serveJSON(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(p.view(r))
}

// serveEvents sends the page's view (its #view element's HTML) after each
// reading, until the client goes or the server shuts down.
func (p *Page) serveEvents(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	ch, stop := p.Watcher.Subscribe()
	defer stop()
	send := func() bool {
		var b bytes.Buffer
		if err := page.ExecuteTemplate(&b, "view", p.view(r)); err != nil {
			return false
		}
		msg, _ := json.Marshal(map[string]string{"html": b.String()})
		if _, err := fmt.Fprintf(w, "event: view\ndata: %s\n\n", msg); err != nil {
			return false
		}
		flusher.Flush()
		return true
	}
	if !send() {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ch:
			if !send() {
				return
			}
		}
	}
}

// serveUnlock force-unlocks the lock named by the form's name, when its
// confirm field repeats the name exactly.
func (p *Page) serveUnlock(w http.ResponseWriter, r *http.Request) {
	if p.Unlock == nil {
		http.Error(w, "this page does not unlock (start dlock top with --allow-unlock)", http.StatusForbidden)
		return
	}
	// Only the page's own script: a form another site posts to loopback
	// carries no such header (a browser asks first, and is refused).
	if r.Header.Get(unlockHeader) != "1" {
		http.Error(w, "unlock: missing the "+unlockHeader+" header the page sends", http.StatusForbidden)
		return
	}
	name, confirm := r.PostFormValue("name"), r.PostFormValue("confirm")
	if name == "" || confirm != name {
		http.Error(w, "type the lock's name exactly to confirm the unlock", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	said, err := p.Unlock(ctx, name)
	if err != nil {
		http.Error(w, "unlock "+name+": "+err.Error(), http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, said)
}

// unlockHeader must be set on POST /api/unlock.
const unlockHeader = "X-Dlock-Unlock"

// fmtMS prints a duration in ms for people: "850 ms", "12.3 s", "4m05s".
func fmtMS(ms int64) string {
	switch {
	case ms < 0:
		return "—"
	case ms < 1000:
		return fmt.Sprintf("%d ms", ms)
	case ms < 60_000:
		return fmt.Sprintf("%.1f s", float64(ms)/1000)
	}
	d := time.Duration(ms) * time.Millisecond
	return d.Truncate(time.Second).String()
}

// pct returns part as a percentage of whole, within 0–100.
func pct(part, whole int64) float64 {
	if whole <= 0 || part <= 0 {
		return 0
	}
	return min(100, float64(part)*100/float64(whole))
}
