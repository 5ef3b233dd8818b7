package epp

import (
	"slices"
	"strings"

	"github.com/prefixgate/prefixgate/internal/sticky"
	"github.com/prefixgate/prefixgate/route"
)

// Sessions, as serve keeps them: a request that carries the session header
// (routing.session_header) goes to the endpoint its session's latest
// request went to, while that endpoint is healthy and under its bound (and
// within the gateway's subset hint); otherwise the policy picks and the
// session follows. The table is the fleet's, shared with serve.

// readSession sets x.session from the request's session header, scoped to
// the request's tenant; a value over sticky.MaxKeyBytes is no session, as
// in serve.
func (x *exchange) readSession() error {
	table, header := x.p.fleet.Sessions()
	if table == nil || header == "" {
		return nil
	}
	v := x.headers[strings.ToLower(header)]
	if v == "" || len(v) > sticky.MaxKeyBytes {
		return nil
	}
	tenant, err := x.p.pipe.Authenticate(x.headers["authorization"])
	if err != nil {
		return err
	}
	x.session = sticky.TenantKey(tenant, v)
	return nil
}

// pickSession places the request on its session's endpoint when it can.
func (x *exchange) pickSession() (route.Decision, bool) {
	table, _ := x.p.fleet.Sessions()
	backend, ok := table.Get(x.session)
	if !ok || (x.hinted && !slices.Contains(x.subset, backend)) {
		return route.Decision{}, false
	}
	d, err := x.p.pipe.Router().PickMember(backend, x.req, true)
	return d, err == nil
}

// followSession remembers where the session's latest request went.
func (x *exchange) followSession(d route.Decision) {
	if x.session != "" {
		table, _ := x.p.fleet.Sessions()
		table.Put(x.session, d.Backend)
	}
}
