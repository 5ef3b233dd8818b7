package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/prefixgate/prefixgate/backends"
	"github.com/prefixgate/prefixgate/internal/flowgate"
	"github.com/prefixgate/prefixgate/internal/h1front"
	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/internal/routes"
	"github.com/prefixgate/prefixgate/normalize"
	"github.com/prefixgate/prefixgate/route"
)

// bodyBuffers recycles request body buffers up to maxPooledBody bytes: a
// body is dead once it has been normalized into the canonical copy that is
// forwarded.
var bodyBuffers = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledBody = 1 << 20

// getBodyBuffer returns a recycled buffer for readBody; putBodyBuffer
// takes it back with the body that was read into it, once nothing refers
// to that body.
func getBodyBuffer() *[]byte { return bodyBuffers.Get().(*[]byte) }

func putBodyBuffer(bp *[]byte, body []byte) {
	if cap(body) > cap(*bp) && cap(body) <= maxPooledBody {
		*bp = body[:0]
	}
	if cap(*bp) > maxPooledBody {
		*bp = nil
	}
	bodyBuffers.Put(bp)
}

// readBody reads a request body within the size limit and decodes its
// Content-Encoding within the decoded-size and ratio limits, into buf's
// capacity when it suffices.
func (s *Server) readBody(r *http.Request, w http.ResponseWriter, buf []byte) ([]byte, error) {
	// The front door's body ends at its Content-Length, which Decode
	// checks against the limit: it needs no reader to bound it.
	var rd io.Reader = r.Body
	if !h1front.IsRequestBody(r.Body) {
		rd = http.MaxBytesReader(w, r.Body, s.pipe.Config().MaxBodyBytes)
	}
	return s.pipe.Decode(buf, headerValue(r.Header, "Content-Encoding"), rd, r.ContentLength)
}

// dispatch routes a prepared request and forwards it, retrying on another
// backend while nothing has come back, with the pick in d (the caller's,
// so that it needs no allocation of its own). The caller must call d's
// Done once the response body is finished. lease learns of every write of
// p.Body that may outlive Forward.
func (s *Server) dispatch(ctx context.Context, path string, p pipeline.Prepared, hdr http.Header, lease *bodyLease, d *route.Decision, pn pin) (*http.Response, error) {
	var lastErr error
	var traced context.Context // ctx with lease's trace, made once if needed
	for attempt := 0; attempt <= *s.cfg.Retries; attempt++ {
		start := time.Now()
		var err error
		*d, err = s.pick(ctx, p.RouteRequest(), pn)
		// One clock read ends the decision and starts the wait for the
		// first byte: between them lie only the queue wait's observation,
		// a check of the transport and, for a transport that holds the
		// body, the lease's trace (made once per request).
		sent := time.Now()
		if err != nil {
			s.pipe.ObservePick(sent.Sub(start), nil)
			if lastErr != nil && errors.Is(err, errNoCandidates) {
				return nil, upstreamError(lastErr)
			}
			if pn.stored != "" && errors.Is(err, errNoCandidates) {
				return nil, pipeline.ResponseNotFound(pn.param, pn.stored, pn.backend)
			}
			return nil, s.pipe.PickError(err, p.Info.Model)
		}
		s.pipe.ObservePick(sent.Sub(start), d)
		if pn.session != "" {
			// The session follows its latest pick, whenever its answer
			// comes.
			s.sessions.Put(pn.session, d.Backend)
		}
		// The pick carries the backend itself: one removed since still
		// gets the request, as it would have a moment earlier.
		b := d.Member.(*backends.Backend)
		fctx := ctx
		// Only a transport that may read the body after Forward returns
		// needs the lease's trace: the HTTP/1.1 fast path copies it first,
		// and skipping the trace there saves its hooks and context.
		if s.pool.HoldsBody(b, len(p.Body)) {
			if traced == nil {
				traced = httptrace.WithClientTrace(ctx, lease.trace())
			}
			fctx = traced
		}
		body := s.withEnginePriority(b, p.Body, pn)
		resp, err := s.pool.Forward(fctx, b, http.MethodPost, path, body, hdr)
		if s.resendOnReuse(ctx, err) {
			resp, err = s.pool.Forward(fctx, b, http.MethodPost, path, body, hdr)
		}
		if err != nil {
			// The outcome ejects b if nothing came back (Backend.Observe).
			d.DoneWith(failedOutcome(err))
			var ue *backends.UnreachableError
			if errors.As(err, &ue) && ctx.Err() == nil && (!ue.Sent || *s.cfg.RetrySent) {
				// Nothing came back: try the next candidate, unless the
				// backend may have run the request and the operator
				// wants it run at most once.
				if attempt < *s.cfg.Retries {
					s.metrics.retries.WithLabelValues(b.Name).Inc()
				}
				lastErr = err
				continue
			}
			return nil, upstreamError(err)
		}
		s.metrics.firstByte(b.Name).Observe(time.Since(sent).Seconds())

		s.pipe.CountSpill(d)
		return resp, nil
	}
	return nil, upstreamError(lastErr)
}

// resendOnReuse reports whether err is a backend's keep-alive connection
// ending as the request went out on it (UnreachableError.ClosedOnReuse)
// and the operator lets a request that may have been sent go again: then
// it goes once more to the same backend, on another connection, before
// the failure counts against the backend.
func (s *Server) resendOnReuse(ctx context.Context, err error) bool {
	var ue *backends.UnreachableError
	return err != nil && errors.As(err, &ue) && ue.ClosedOnReuse && *s.cfg.RetrySent && ctx.Err() == nil
}

// pin places a request on one backend rather than by the policy alone.
type pin struct {
	// backend is the member to use; "" routes by the policy.
	backend string
	// stored is the id of a stored response the request needs: only
	// backend holds it, so no other backend may take the request. Empty
	// for a session, which falls back to the policy when its backend is
	// full or gone. param is the member or path part that named it.
	stored, param string
	// session is the session the request belongs to, remembered with
	// the pick; "" for none.
	session string
	// flow is the request's flow and bytes its body's size, for flow
	// control; adm, when not nil, receives how the request went through.
	flow  flowgate.Identity
	bytes int
	adm   *flowgate.Admission
}

// pick chooses the backend for req: the pinned one when there is one.
func (s *Server) pick(ctx context.Context, req route.Request, pn pin) (route.Decision, error) {
	if pn.backend == "" {
		return s.acquire(ctx, req, pn)
	}
	d, err := s.rt().PickMember(pn.backend, req, pn.stored == "")
	if err != nil && pn.stored == "" {
		return s.acquire(ctx, req, pn)
	}
	return d, err
}

// copyBuffers recycles copyStream's buffers: one per request otherwise.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyStream copies a backend body to w. With flush it flushes after every
// read, so that server-sent events reach the client as they arrive;
// without, the writes go out when w's buffer fills or the handler returns.
// When as is not nil it reads each piece once it is written (the events'
// usage and text).
func copyStream(w http.ResponseWriter, body io.Reader, flush bool, as *answerStream) error {
	rc := http.NewResponseController(w)
	bp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bp)
	buf := *bp
	for {
		n, err := body.Read(buf)
		if n > 0 {
			// Read before it is written: what the answer teaches (a stored
			// response's id) is known before the client can act on it.
			if as != nil {
				as.feed(buf[:n])
			}
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			if flush {
				if ferr := rc.Flush(); ferr != nil && !errors.Is(ferr, http.ErrNotSupported) {
					return ferr
				}
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// exchange is one request in flight to a backend: what the front doors
// share between prepare and reading the answer.
type exchange struct {
	resp *http.Response
	d    *route.Decision
	info normalize.RouteInfo
	s    *Server
	b    *backends.Backend
	// usage is what the answer reported (usage.go); err is why relaying
	// it failed, if it did. close hands both to the router.
	usage backends.Usage
	err   error
	// learnID: the answer is a stored response, whose id is remembered
	// with its backend (Server.responses).
	learnID bool
	// tenant scopes the ids learned (sticky.TenantKey).
	tenant string
	// flow is the request's flow, adm how it went through flow control,
	// outTokens the answer's output tokens (0 when unknown), charged to
	// the flow at close.
	flow      flowgate.Identity
	adm       flowgate.Admission
	outTokens int
	// answer is the prompt's blocks through the generated text, for the
	// prefix index (answerblocks.go); nil when unknown.
	answer []uint64
	// lease holds body, the canonical request, until no transport write
	// can still read it.
	lease *bodyLease
	body  []byte
	// leaseOf is lease's storage, dec d's, routing the routing headers'
	// values: one allocation for all.
	leaseOf bodyLease
	dec     route.Decision
	routing [3]string
	// legs is a split request's prefill side (disagg.go); nil otherwise.
	legs *pdLegs
}

// open normalizes body, routes it and forwards it to path, then writes the
// routing headers into out. On success the caller must call close.
func (s *Server) open(ctx context.Context, path string, mode normalize.Mode, body []byte, group string, hdr, out http.Header) (*exchange, error) {
	return s.openRoute(ctx, nil, path, mode, body, group, hdr, out)
}

// openRoute is open for a route of the table (nil for none): a stored
// response or a session may pin the request to one backend.
func (s *Server) openRoute(ctx context.Context, rt *routes.Route, path string, mode normalize.Mode, body []byte, group string, hdr, out http.Header) (*exchange, error) {
	// Spans only when they are exported (tracing.on): building them is
	// work on every request.
	nctx, span := ctx, trace.Span(nil)
	if s.tracing.on {
		nctx, span = s.startSpan(ctx, "normalize", attribute.Int("prefixgate.body_bytes", len(body)))
	}
	x := &exchange{s: s, usage: backends.UnknownUsage}
	lease := &x.leaseOf
	lease.buf = canonicalBuffers.Get().(*[]byte)
	p, err := s.pipe.Normalize(nctx, *lease.buf, body, mode, group, 0)
	if span != nil {
		span.End()
	}
	if err != nil {
		lease.release(nil)
		return nil, err
	}
	tenant := ""
	if rt != nil && s.pipe.TenantsEnabled() {
		tenant = pipeline.TenantFrom(ctx)
	}
	pn, err := s.pinFor(rt, tenant, p.Body, hdr)
	if err != nil {
		lease.release(p.Body)
		return nil, err
	}
	if pn.flow, err = s.identify(ctx, hdr, p.Info.Group); err != nil {
		lease.release(p.Body)
		return nil, err
	}
	pn.bytes, pn.adm, x.flow = len(p.Body), &x.adm, pn.flow
	fwd := forwardHeaders(hdr)
	span = nil
	if s.tracing.on {
		var fctx context.Context
		fctx, span = s.startSpan(ctx, "route and forward", attribute.String("prefixgate.key", p.Info.KeyHex()))
		defer span.End()
		injectTrace(fctx, fwd)
	}
	d := &x.dec
	resp, legs, err := s.dispatchPD(ctx, path, p, fwd, lease, d, pn)
	if err != nil {
		lease.release(p.Body)
		return nil, err
	}
	if x.legs = legs; legs != nil {
		out[PrefillBackendHeader] = legs.header[:1:1]
	}
	x.learnID, x.tenant = rt != nil && rt.Routing == routes.ByPrefixOrStored, tenant
	if span != nil {
		span.SetAttributes(attribute.String("prefixgate.backend", d.Backend), attribute.String("prefixgate.decision", d.Reason.String()))
	}
	// Where the request went. The names are canonical already (Set
	// would check each again), and the values live in x: no allocation
	// of their own.
	x.routing = [3]string{d.Backend, d.Reason.String(), p.Info.KeyHex()}
	out[BackendHeader], out[DecisionHeader], out[KeyHeader] = x.routing[0:1:1], x.routing[1:2:2], x.routing[2:3:3]
	if x.adm.Queued {
		out[flowgate.FlowHeader] = []string{flowgate.HeaderValue(x.flow, x.adm)}
	}
	x.resp, x.d, x.info, x.b, x.lease, x.body = resp, d, p.Info, d.Member.(*backends.Backend), lease, p.Body
	return x, nil
}

// canonicalBuffers recycles canonical request bodies (up to
// maxPooledBody), so that the steady path does not allocate one per
// request.
var canonicalBuffers = sync.Pool{New: func() any { return new([]byte) }}

// bodyLease holds a pooled canonical body until no transport can still be
// reading it. A response can arrive before the request's body has been
// written (a backend may answer early), and the transport may retry a
// request on another connection, so the end of the exchange alone does
// not free the body: every connection the transport got for it (GotConn)
// must also have finished writing it (WroteRequest, which the transport
// calls once per write, failed or not). A write that never ends keeps the
// buffer out of the pool, and the garbage collector takes it.
type bodyLease struct {
	mu            sync.Mutex
	buf           *[]byte
	body          []byte
	conns, writes int
	closed        bool
}

func (l *bodyLease) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) {
			l.mu.Lock()
			l.conns++
			l.mu.Unlock()
		},
		WroteRequest: func(httptrace.WroteRequestInfo) {
			l.mu.Lock()
			l.writes++
			l.putLocked()
			l.mu.Unlock()
		},
	}
}

// release ends the exchange's claim on body (nil when nothing was
// written into the buffer).
func (l *bodyLease) release(body []byte) {
	l.mu.Lock()
	l.closed, l.body = true, body
	l.putLocked()
	l.mu.Unlock()
}

func (l *bodyLease) putLocked() {
	if !l.closed || l.buf == nil || l.writes != l.conns {
		return
	}
	if cap(l.body) > cap(*l.buf) && cap(l.body) <= maxPooledBody {
		*l.buf = l.body[:0]
	}
	if cap(*l.buf) > maxPooledBody {
		*l.buf = nil
	}
	canonicalBuffers.Put(l.buf)
	l.buf, l.body = nil, nil
}

// close releases the backend's body and the in-flight slot, handing the
// answer's outcome and usage to the router and the usage metrics. The one
// outcome is all the router and the backend's passive health learn of the
// request: in-flight count, prefill charge, index feedback and learning,
// and (through Backend.Observe) a 5xx or a stalled stream.
func (x *exchange) close() {
	x.resp.Body.Close()
	if x.legs != nil {
		x.legs.close(x.err != nil || x.resp.StatusCode/100 != 2)
	}
	x.lease.release(x.body)
	x.s.countUsage(x.d.Backend, x.usage)
	x.chargeOutput()
	x.d.DoneWith(route.Outcome{Err: x.err, FirstByte: true, Status: x.resp.StatusCode,
		PromptTokens: x.usage.PromptTokens, CachedTokens: x.usage.CachedTokens, Blocks: x.answer})
}

// record counts one answered request. x is nil when the request failed
// before reaching a backend; status is the HTTP status the caller saw.
func (s *Server) record(routeName string, x *exchange, status int) {
	decision, backend := "", ""
	if x != nil {
		decision, backend = x.d.Reason.String(), x.d.Backend
	}
	s.metrics.request(requestLabels{routeName, decision, backend, status}).Inc()
}
