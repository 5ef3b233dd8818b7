package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prefixgate/prefixgate/internal/bodydecode"
	"github.com/prefixgate/prefixgate/normalize"
	"github.com/prefixgate/prefixgate/route"
)

// Pipeline runs requests through tenant, decode, normalize and key for one
// router. It is safe for concurrent use.
type Pipeline struct {
	cfg     Config
	router  *route.Router
	metrics metrics
}

// New returns the pipeline for cfg (after Defaults and Validate) in front
// of router, which may change in place (route.Router.Reconfigure) while
// the pipeline serves.
func New(cfg Config, router *route.Router) (*Pipeline, error) {
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Pipeline{cfg: cfg, router: router, metrics: newMetrics()}, nil
}

// Config is the pipeline's configuration, defaults applied.
func (p *Pipeline) Config() Config { return p.cfg }

// Router is the router the pipeline prepares requests for.
func (p *Pipeline) Router() *route.Router { return p.router }

// Request is one request as a front door received it: its body whole,
// not yet decoded.
type Request struct {
	Body []byte
	// Encoding is the body's Content-Encoding; "" or identity for none.
	Encoding string
	Mode     normalize.Mode
	// Group is the caller's routing group (GroupHeader).
	Group string
	// Authorization is the Authorization header's value, the tenant's API
	// key when tenants are configured.
	Authorization string
}

// Prepared is a request after authentication, decoding, normalization and
// keying.
type Prepared struct {
	// Body is the canonical body: what the backend should receive.
	Body []byte
	// Info is the routing key and what it was computed from.
	Info normalize.RouteInfo
}

// RouteRequest is the router's view of the prepared request.
func (p Prepared) RouteRequest() route.Request {
	return route.Request{Key: p.Info.Key, SpillKeys: p.Info.SpillKeys, Model: p.Info.Model, Blocks: p.Info.Blocks, PromptTokens: p.Info.PromptTokens}
}

// Prepare runs in through every step for a front door that holds the body
// whole: the size limit, decoding by its Content-Encoding within the
// limits, the tenant when tenants are configured, then canonicalization
// and keying. Errors are *Error.
func (p *Pipeline) Prepare(ctx context.Context, in Request) (Prepared, error) {
	if err := p.CheckSize(int64(len(in.Body))); err != nil {
		return Prepared{}, err
	}
	raw := in.Body
	if e := strings.TrimSpace(in.Encoding); e != "" && !strings.EqualFold(e, "identity") {
		decoded, err := bodydecode.DecodeInto(nil, in.Encoding, bytes.NewReader(raw), p.decodeLimits())
		if err != nil {
			return Prepared{}, p.normalizeError(err)
		}
		raw = decoded
	}
	if p.TenantsEnabled() {
		tenant, err := p.Authenticate(in.Authorization)
		if err != nil {
			return Prepared{}, err
		}
		ctx = WithTenant(ctx, tenant)
	}
	return p.Normalize(ctx, nil, raw, in.Mode, in.Group, 0)
}

// CheckSize refuses a body of n bytes as received when it is over the
// limit (413).
func (p *Pipeline) CheckSize(n int64) error {
	if n > p.cfg.MaxBodyBytes {
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large",
			Message: "request body is larger than the limit of " + strconv.FormatInt(p.cfg.MaxBodyBytes, 10) + " bytes" + p.cfg.Raises("MaxBodyBytes")}
	}
	return nil
}

func (p *Pipeline) decodeLimits() bodydecode.Limits {
	return bodydecode.Limits{MaxDecodedBytes: p.cfg.MaxDecodedBytes, MaxRatio: p.cfg.MaxRatio}
}

// Decode reads a body as it arrives, of contentLength bytes (-1 when
// unknown), and decodes its Content-Encoding within the decoded-size and
// ratio limits, into dst's capacity when it suffices. A contentLength over
// the limit is refused before anything is read; otherwise the caller
// bounds body at MaxBodyBytes (http.MaxBytesReader, whose error is a 413
// here).
func (p *Pipeline) Decode(dst []byte, encoding string, body io.Reader, contentLength int64) ([]byte, error) {
	if contentLength > p.cfg.MaxBodyBytes {
		// Refuse at once rather than read up to the limit first.
		return nil, &Error{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large", BodyUnread: true,
			Message: fmt.Sprintf("request body of %d bytes is larger than the limit of %d bytes", contentLength, p.cfg.MaxBodyBytes) + p.cfg.Raises("MaxBodyBytes")}
	}
	lim := p.decodeLimits()
	lim.SizeHint = contentLength // one exact allocation for the body
	out, err := bodydecode.DecodeInto(dst, encoding, body, lim)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &Error{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large",
				Message: fmt.Sprintf("request body is larger than the limit of %d bytes", mbe.Limit) + p.cfg.Raises("MaxBodyBytes")}
		}
		return nil, p.normalizeError(err)
	}
	return out, nil
}

// checkGroup is normalize's group id check (the one the SDKs share), as
// the HTTP error a front door answers with.
func checkGroup(g string) error {
	if err := normalize.CheckGroup(g); err != nil {
		return &Error{Status: http.StatusBadRequest, Code: "invalid_group", Message: err.Error()}
	}
	return nil
}

// Normalize canonicalizes a decoded body and computes its routing key, for
// the tenant in ctx (WithTenant) if any, writing the canonical body into
// dst's capacity when it suffices. prefixLength 0 is the configured one.
func (p *Pipeline) Normalize(ctx context.Context, dst, raw []byte, mode normalize.Mode, group string, prefixLength int) (Prepared, error) {
	if err := checkGroup(group); err != nil {
		return Prepared{}, err
	}
	if prefixLength == 0 {
		prefixLength = p.cfg.PrefixLength
	}
	opts := normalize.Options{Mode: mode, MaxBodyBytes: int(p.cfg.MaxDecodedBytes), MaxDepth: p.cfg.MaxDepth, MaxStringBytes: p.cfg.MaxStringBytes}
	// Only a policy that reads the prompt's blocks gets them; the others
	// skip hashing the whole prompt.
	kopts := normalize.KeyOptions{Mode: mode, Group: group, PrefixLength: prefixLength, Blocks: p.router.NeedsBlocks()}
	var scope normalize.Scope
	if tenant := tenantFrom(ctx); tenant != "" {
		scope = p.tenantScope(tenant)
	}
	start := time.Now()
	if need := len(raw) + tenantSaltRoom; cap(dst) < need {
		dst = make([]byte, 0, need)
	}
	body, info, err := normalize.NormalizeScoped(dst[:0], raw, opts, kopts, scope)
	p.metrics.normalizeSeconds.Observe(time.Since(start).Seconds())
	if err != nil {
		p.metrics.normalizeErrors.WithLabelValues(normalize.ErrorCode(err)).Inc()
		if normalize.ErrorCode(err) == normalize.CodeInvalidScope && !jsonObject(raw) {
			return Prepared{}, errNotAnObject
		}
		return Prepared{}, p.normalizeError(err)
	}
	return Prepared{Body: body, Info: info}, nil
}
