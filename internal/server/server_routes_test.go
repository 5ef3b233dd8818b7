package server

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/prefixgate/prefixgate/internal/h1front"
)

// TestPlainRoutesAreTheMuxs: for the front door's plain paths and their
// near misses (other methods, an escaped or unclean path, a trailing
// slash, a query, the "*" target), the table plainRoutes keeps answers
// exactly as the mux it was made from: same status, headers, body and
// request pattern.
func TestPlainRoutesAreTheMuxs(t *testing.T) {
	s, err := New(Config{Backends: []string{"127.0.0.1:1"}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	pr, ok := s.routes().(*plainRoutes)
	if !ok {
		t.Fatalf("routes is a %T, want *plainRoutes", s.routes())
	}
	var targets []string
	for _, p := range h1front.PlainPaths {
		targets = append(targets, p, p+"/", p+"?a=1", strings.Replace(p, "/", "/%2F", 1), "/."+p, strings.ToUpper(p))
	}
	targets = append(targets, "/", "/v1", "/v1/chat")
	type seen struct {
		status  int
		header  http.Header
		body    string
		pattern string
	}
	serve := func(h http.Handler, method, target string) seen {
		u, err := url.ParseRequestURI(target)
		if err != nil {
			t.Fatal(err)
		}
		r := &http.Request{Method: method, URL: u, RequestURI: target, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{}, Host: "router:8080", Body: io.NopCloser(strings.NewReader(`{"bad":`)), ContentLength: 7}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		w.Header().Del("Date")
		return seen{w.Code, w.Header(), w.Body.String(), r.Pattern}
	}
	checked := 0
	for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodHead, http.MethodOptions} {
		for _, target := range targets {
			got, want := serve(pr, method, target), serve(pr.mux, method, target)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s %s: table %+v, mux %+v", method, target, got, want)
			}
			checked++
		}
	}
	// "*" (OPTIONS * HTTP/1.1): the mux's own answer, a 400.
	r := &http.Request{Method: http.MethodOptions, URL: &url.URL{Path: "*"}, RequestURI: "*", Proto: "HTTP/1.1", ProtoMajor: 1,
		ProtoMinor: 1, Header: http.Header{}, Host: "h", Body: http.NoBody}
	w := httptest.NewRecorder()
	pr.ServeHTTP(w, r)
	if w.Code != http.StatusBadRequest {
		t.Fatalf("OPTIONS *: %d, want the mux's 400", w.Code)
	}
	if checked < 5*len(h1front.PlainPaths)*6 {
		t.Fatalf("only %d requests compared", checked)
	}
}
