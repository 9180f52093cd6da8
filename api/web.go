package api

import (
	"embed"
	"mime"
	"path"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"
)

// webFiles is the chat page: plain HTML, CSS and JavaScript, no build step.
//
//go:embed web/index.html web/app.js web/style.css
var webFiles embed.FS

// webRoutes serves the chat page at / and its assets under /ui/. The page
// holds no data, so it needs no API key; it sends the key the user enters
// with its API calls.
func (s *Server) webRoutes(r *router.Router) {
	serve := func(name string) fasthttp.RequestHandler {
		body, err := webFiles.ReadFile("web/" + name)
		if err != nil {
			panic("BUG: embedded web file missing: " + err.Error())
		}
		ctype := mime.TypeByExtension(path.Ext(name))
		if path.Ext(name) == ".js" {
			ctype = "text/javascript; charset=utf-8"
		}
		return func(ctx *fasthttp.RequestCtx) {
			start := time.Now()
			ctx.SetContentType(ctype)
			h := &ctx.Response.Header
			h.Set("Cache-Control", "no-cache")
			h.Set("X-Content-Type-Options", "nosniff")
			// The page talks to this server only and is never framed.
			h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
			h.Set("X-Frame-Options", "DENY")
			h.Set("Referrer-Policy", "no-referrer")
			ctx.SetBody(body)
			s.logRequest(ctx, "web", start, 0)
		}
	}
	getRoute(r, "/", serve("index.html"))
	getRoute(r, "/ui/app.js", serve("app.js"))
	getRoute(r, "/ui/style.css", serve("style.css"))
}
