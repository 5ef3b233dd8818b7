package server

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/tidwall/gjson"

	"github.com/prefixgate/prefixgate/backends"
	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/route"
)

// maxPrefillAnswer bounds a vLLM prefill leg's answer: one token and its
// kv_transfer_params.
const maxPrefillAnswer = 1 << 20

// splitOutcome is how a split ended.
type splitOutcome uint8

const (
	// splitDone: the decode leg answered (resp), or sent nothing back
	// (err, d released).
	splitDone splitOutcome = iota
	// prefillFailed: no prefill leg succeeded; d is still held.
	prefillFailed
	// decodeRefused: the decode leg answered a server error before a
	// byte reached the client; d is still held.
	decodeRefused
)

// runSplit sends a split request's legs: the prefill leg, retried on
// another prefill worker when it fails (PrefillRetries), then or beside it
// the decode leg to d.
func (s *Server) runSplit(ctx context.Context, path string, p pipeline.Prepared, hdr http.Header, d *route.Decision, legs *pdLegs) (*http.Response, error, splitOutcome) {
	hdr = withRequestID(hdr)
	req := p.RouteRequest()
	tried := map[string]bool{}
	for attempt := 0; ; attempt++ {
		pb := legs.prefill.Member.(*backends.Backend)
		tried[pb.Name] = true
		legs.header[0] = pb.Name
		var resp *http.Response
		var err error
		var out splitOutcome
		if s.pd.protocol(pb) == ProtocolSGLang {
			resp, err, out = s.splitSGLang(ctx, path, p, hdr, d, legs)
		} else {
			resp, err, out = s.splitVLLM(ctx, path, p, hdr, d, legs)
		}
		if out != prefillFailed || ctx.Err() != nil || attempt >= *s.pd.cfg.PrefillRetries {
			return resp, err, out
		}
		next, ok := s.pd.nextPrefill(req, tried, d.Backend)
		if !ok {
			return nil, nil, prefillFailed
		}
		legs.prefill = next
	}
}

// nextPrefill picks a prefill worker for a retried prefill leg: the
// policy's pick when it is one not tried yet, else the least loaded
// healthy one not tried that serves the model and is below its bound;
// false when there is none.
func (pd *disagg) nextPrefill(req route.Request, tried map[string]bool, decode string) (route.Decision, bool) {
	if next, err := pd.prefill.TryPick(req); err == nil {
		if !tried[next.Backend] && next.Backend != decode {
			return next, true
		}
		next.Done()
	}
	members := pd.prefill.Status()
	slices.SortFunc(members, func(a, b route.MemberStatus) int { return cmp.Compare(a.Load, b.Load) })
	for _, m := range members {
		if !m.Healthy || tried[m.Name] || m.Name == decode {
			continue
		}
		if next, err := pd.prefill.PickMember(m.Name, req, true); err == nil {
			return next, true
		}
	}
	return route.Decision{}, false
}

// withRequestID is hdr with an X-Request-Id, the client's or a new one:
// both legs carry the same, as the engines' disaggregated proxies send it.
func withRequestID(hdr http.Header) http.Header {
	if len(hdr["X-Request-Id"]) > 0 {
		return hdr
	}
	out := make(http.Header, len(hdr)+1)
	for k, v := range hdr {
		out[k] = v
	}
	out["X-Request-Id"] = []string{fmt.Sprintf("pd-%016x", newRooms(1)[0])}
	return out
}

// splitVLLM runs vLLM's two phases: the prefill leg with max_tokens 1 and
// kv_transfer_params, whose answer's kv_transfer_params go into the
// decode leg. The prefill leg's pick is released when it ends.
func (s *Server) splitVLLM(ctx context.Context, path string, p pipeline.Prepared, hdr http.Header, d *route.Decision, legs *pdLegs) (*http.Response, error, splitOutcome) {
	pbody, err := vllmPrefillBody(p.Body)
	if err != nil {
		legs.prefill.Done()
		return nil, nil, prefillFailed
	}
	params, err := s.prefillLeg(ctx, path, pbody, hdr, &legs.prefill, p.Info.Blocks, true)
	if err != nil {
		return nil, nil, prefillFailed
	}
	dbody, err := vllmDecodeBody(p.Body, params)
	if err != nil {
		return nil, nil, prefillFailed
	}
	resp, err := s.decodeLeg(ctx, path, dbody, hdr, d)
	return resp, err, s.refused(d, resp)
}

// refused reports decodeRefused for a decode leg that answered a server
// error, closing its answer: the request then runs whole on d, which
// computes the prompt itself. A client error stands.
func (s *Server) refused(d *route.Decision, resp *http.Response) splitOutcome {
	if resp == nil || resp.StatusCode < 500 {
		return splitDone
	}
	resp.Body.Close()
	s.pd.metrics.leg("decode", d.Backend, fmt.Errorf("answered %d", resp.StatusCode), 0)
	return decodeRefused
}

// prefillLeg sends one prefill leg and reads its whole answer (bounded by
// PrefillTimeout and the request's deadline), then releases its pick with
// the outcome. With wantParams, an answer without kv_transfer_params is a
// failure; the params are returned.
func (s *Server) prefillLeg(ctx context.Context, path string, body []byte, hdr http.Header, pre *route.Decision, blocks []uint64, wantParams bool) ([]byte, error) {
	b := pre.Member.(*backends.Backend)
	pctx, cancel := context.WithTimeout(ctx, s.pd.cfg.PrefillTimeout)
	defer cancel()
	start := time.Now()
	resp, err := s.pool.Forward(pctx, b, http.MethodPost, path, body, hdr)
	if err != nil {
		pre.DoneWith(failedOutcome(err))
		s.pd.metrics.leg("prefill", b.Name, err, 0)
		return nil, err
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxPrefillAnswer))
	resp.Body.Close()
	r := gjson.GetManyBytes(raw, "kv_transfer_params", "usage", "meta_info")
	u := backends.UnknownUsage
	if r[1].IsObject() || r[2].IsObject() {
		u = b.EventUsage([]byte(r[1].Raw), []byte(r[2].Raw))
	}
	switch {
	case err != nil:
	case resp.StatusCode/100 != 2:
		err = fmt.Errorf("prefill worker %s answered %d: %.300s", b.Name, resp.StatusCode, raw)
	case wantParams && !r[0].IsObject():
		err = fmt.Errorf("prefill worker %s answered without kv_transfer_params", b.Name)
	}
	pre.DoneWith(route.Outcome{Err: err, FirstByte: true, Status: resp.StatusCode,
		PromptTokens: u.PromptTokens, CachedTokens: u.CachedTokens, Blocks: blocks})
	s.pd.metrics.leg("prefill", b.Name, err, time.Since(start))
	if err != nil {
		s.log.Warn("prefill leg failed", "backend", b.Name, "err", err)
		return nil, err
	}
	return []byte(r[0].Raw), nil
}

// decodeLeg sends the decode leg to d's backend. When it fails with
// nothing back, d is released and Forward's error is returned.
func (s *Server) decodeLeg(ctx context.Context, path string, body []byte, hdr http.Header, d *route.Decision) (*http.Response, error) {
	b := d.Member.(*backends.Backend)
	sent := time.Now()
	resp, err := s.pool.Forward(ctx, b, http.MethodPost, path, body, hdr)
	if err != nil {
		d.DoneWith(failedOutcome(err))
		s.pd.metrics.leg("decode", b.Name, err, 0)
		return nil, err
	}
	if resp.StatusCode < 500 {
		s.pd.metrics.leg("decode", b.Name, nil, 0)
	}
	s.metrics.firstByte(b.Name).Observe(time.Since(sent).Seconds())
	s.pipe.CountSpill(d)
	return resp, nil
}

// forwarded is one leg's Forward result.
type forwarded struct {
	resp *http.Response
	err  error
	took time.Duration // to the response headers
}

// splitSGLang runs SGLang's bootstrap: both legs at once with the prefill
// worker's bootstrap address and fresh rooms; the client gets the decode
// leg's answer. A prefill twin that fails before the decode leg has
// answered ends the decode leg (prefillFailed); a decode leg that fails
// ends its twin.
func (s *Server) splitSGLang(ctx context.Context, path string, p pipeline.Prepared, hdr http.Header, d *route.Decision, legs *pdLegs) (*http.Response, error, splitOutcome) {
	pb := legs.prefill.Member.(*backends.Backend)
	body, err := sglangBody(p.Body, pb.URL.Hostname(), s.pd.bootstrapPort(pb), newRooms(min(sglangBatch(p.Body), maxBatch)))
	if err != nil {
		legs.prefill.Done()
		return nil, nil, prefillFailed
	}
	twinCtx, twin := context.WithCancel(ctx)
	decodeCtx, decode := context.WithCancel(ctx)
	done, pre := make(chan struct{}), make(chan error, 1)
	go func() {
		defer close(done)
		_, err := s.prefillLeg(twinCtx, path, body, hdr, &legs.prefill, p.Info.Blocks, false)
		pre <- err
	}()
	dec := make(chan forwarded, 1)
	go func() {
		sent := time.Now()
		resp, err := s.pool.Forward(decodeCtx, d.Member.(*backends.Backend), http.MethodPost, path, body, hdr)
		dec <- forwarded{resp, err, time.Since(sent)}
	}()
	var f forwarded
	select {
	case f = <-dec:
	case err := <-pre:
		if err != nil {
			decode()
			if f = <-dec; f.resp != nil {
				f.resp.Body.Close()
			}
			twin()
			return nil, nil, prefillFailed
		}
		f = <-dec
	}
	legs.twin, legs.done, legs.decode = twin, done, decode
	return s.decodeAnswered(d, f, legs)
}

// decodeAnswered takes an SGLang decode leg's Forward result: a failure
// or a refusal ends the prefill twin; a failure releases d.
func (s *Server) decodeAnswered(d *route.Decision, f forwarded, legs *pdLegs) (*http.Response, error, splitOutcome) {
	if f.err != nil {
		legs.close(true)
		d.DoneWith(failedOutcome(f.err))
		s.pd.metrics.leg("decode", d.Backend, f.err, 0)
		return nil, f.err, splitDone
	}
	if f.resp.StatusCode/100 != 2 { // its twin has no one to hand the KV to
		legs.twin()
		<-legs.done
	}
	if out := s.refused(d, f.resp); out != splitDone {
		return nil, nil, out
	}
	s.pd.metrics.leg("decode", d.Backend, nil, 0)
	s.metrics.firstByte(d.Backend).Observe(f.took.Seconds())
	s.pipe.CountSpill(d)
	return f.resp, nil, splitDone
}
