package signin

import (
	"bytes"
	_ "embed"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

//go:embed page.html
var pageSource string

var page = template.Must(template.New("page").Parse(pageSource))

// view is what the page shows.
type view struct {
	Nonce      string
	Error      string
	Problem    string // a request that cannot go on: shown alone
	ClientName string
	// ClientDocument is the URL of the metadata document the client's
	// name comes from: its publisher vouches for the name, this server
	// does not.
	ClientDocument string
	RedirectTo     string
	Audience       string
	Principal      string
	Accounts       string
	Subject        string
	AccessTTL      string
	RefreshTTL     string
	CSRF           string
	Params         url.Values
	ActionPath     string
}

// showConsent renders the consent form for a checked request, with a fresh
// CSRF token in the form and in a cookie.
func (s *Server) showConsent(w http.ResponseWriter, q *request, problem string, status int) {
	csrf, err := s.secret(32)
	if err != nil {
		s.serverError(w, "show the sign-in page", err)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: csrfCookie, Value: csrf, Path: AuthorizePath, MaxAge: int((10 * time.Minute).Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode,
	})
	name := q.client.ClientName
	if name == "" {
		name = "An MCP host"
	}
	document := ""
	if q.client.document {
		document = q.client.id
	}
	s.render(w, status, view{
		Error: problem, ClientName: name, ClientDocument: document, RedirectTo: origin(q.redirectURI), Audience: s.audience,
		Principal: s.opts.Principal, Accounts: strings.Join(s.opts.Accounts, ", "), Subject: s.opts.DefaultSubject,
		AccessTTL: span(s.opts.AccessTTL), RefreshTTL: span(s.opts.RefreshTTL), CSRF: csrf,
		Params: q.params(), ActionPath: AuthorizePath,
	}, origin(q.redirectURI))
}

// showError renders a request that cannot go on, without a form.
func (s *Server) showError(w http.ResponseWriter, status int, problem string) {
	s.render(w, status, view{Problem: problem}, "")
}

// render writes the page with headers that keep it from being framed,
// cached, or submitting anywhere but here and to the client's redirect
// origin (the approval's redirect counts as the form's target).
func (s *Server) render(w http.ResponseWriter, status int, v view, redirectOrigin string) {
	nonce, err := s.secret(16)
	if err != nil {
		s.opts.Logger.Error("sign-in: page nonce", "err", err)
		http.Error(w, "server error", http.StatusInternalServerError)
		return
	}
	v.Nonce = nonce
	var body bytes.Buffer
	if err := page.Execute(&body, v); err != nil {
		s.opts.Logger.Error("sign-in: render the page", "err", err)
		http.Error(w, "server error", http.StatusInternalServerError)
		return
	}
	formAction := "'self'"
	if redirectOrigin != "" {
		formAction += " " + redirectOrigin
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'nonce-"+nonce+"'; form-action "+formAction+"; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	// same-origin, not no-referrer: under no-referrer a browser sends
	// Origin: null with the form, which sameOrigin must refuse.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body.Bytes())
}

// origin is scheme://host:port of a URI: what the page says the code goes
// to.
func origin(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// span says a lifetime as a person would: "15 minutes", "30 days".
func span(d time.Duration) string {
	for _, unit := range []struct {
		size time.Duration
		name string
	}{{24 * time.Hour, "day"}, {time.Hour, "hour"}, {time.Minute, "minute"}, {time.Second, "second"}} {
		if d >= unit.size && d%unit.size == 0 {
			n := int(d / unit.size)
			if n == 1 {
				return "1 " + unit.name
			}
			return strconv.Itoa(n) + " " + unit.name + "s"
		}
	}
	return d.String()
}
