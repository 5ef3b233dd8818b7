package epp

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/internal/routes"
	"github.com/prefixgate/prefixgate/internal/sticky"
	"github.com/prefixgate/prefixgate/route"
)

// A vLLM replica keeps the Responses it produced in its own memory: a
// follow-up naming previous_response_id, a GET or a cancel of one works on
// that replica alone. The picker learns each response's id from the answer
// as the gateway streams it back (a plain answer's "id", a stream's
// response.created event), before it hands back the piece that carries it,
// and remembers id → endpoint in the fleet's stored-responses table, the
// one serve uses (responses.max_ids, least recently used evicted first). A
// request naming a known id goes to that endpoint while it is healthy; an
// unknown id, or one whose endpoint is gone, is a 404 in OpenAI's shape.

// idHead is how much of a Responses answer's beginning is kept to read its
// id: a plain answer's first member, a stream's first event.
const idHead = 64 << 10

// pinStored reads the stored response a request needs, if any: the id in
// the path of GET /v1/responses/{id} and its cancel, or the body's
// previous_response_id on POST /v1/responses (body canonical). It sets
// x.pin to the endpoint that stored it, and x.learnID when the answer will
// be a stored response to remember.
func (x *exchange) pinStored(rt *routes.Route, body []byte) error {
	if rt == nil || (rt.Routing != routes.ByStoredID && rt.Routing != routes.ByPrefixOrStored) {
		return nil
	}
	tenant, err := x.p.pipe.Authenticate(x.headers["authorization"])
	if err != nil {
		return err
	}
	x.tenant = tenant
	var id, param string
	if rt.Routing == routes.ByStoredID {
		id = strings.TrimSuffix(strings.TrimPrefix(x.path, "/v1/responses/"), "/cancel")
		if u, err := url.PathUnescape(id); err == nil {
			id = u // as serve's mux hands it over
		}
	} else {
		x.learnID = true
		prev := gjson.GetBytes(body, "previous_response_id")
		if prev.Type != gjson.String || prev.Str == "" {
			return nil
		}
		id, param = prev.Str, "previous_response_id"
	}
	backend, ok := x.p.fleet.StoredResponses().Get(sticky.TenantKey(tenant, id))
	if !ok {
		return pipeline.ResponseNotFound(param, id, "")
	}
	x.pin, x.pinID, x.pinParam = backend, id, param
	return nil
}

// pickStored places the request on the endpoint that stored the response
// it names, whatever its load: no other endpoint can answer it.
func (x *exchange) pickStored() (route.Decision, error) {
	if x.hinted && !slices.Contains(x.subset, x.pin) {
		return route.Decision{}, &pipeline.Error{Status: http.StatusNotFound, Code: "response_not_found", Param: x.pinParam,
			Message: fmt.Sprintf("response %.300q is stored on endpoint %s, which the gateway's endpoint subset hint does not allow", x.pinID, x.pin)}
	}
	d, err := x.p.pipe.Router().PickMember(x.pin, x.req, false)
	if err != nil {
		return d, pipeline.ResponseNotFound(x.pinParam, x.pinID, x.pin)
	}
	return d, nil
}

// learn reads a successful Responses answer's id from its beginning as
// the pieces come (chunk; end is the body's last piece) and remembers it
// with the endpoint that served. It gives up once idHead bytes came
// without one.
func (x *exchange) learn(chunk []byte, end bool) {
	if !x.learnID || x.learned || x.status != http.StatusOK || !x.picked {
		return
	}
	x.head = append(x.head, chunk[:min(len(chunk), idHead-len(x.head))]...)
	full := len(x.head) >= idHead
	var id string
	if x.sse {
		id = createdID(x.head)
	} else if end || full {
		// The id is a plain answer's first member; a body longer than
		// idHead is read from its beginning, which gjson parses as far as
		// it goes.
		if v := gjson.GetBytes(x.head, "id"); v.Type == gjson.String {
			id = v.Str
		}
	}
	if id != "" {
		x.p.fleet.StoredResponses().Put(sticky.TenantKey(x.tenant, id), x.d.Backend)
		x.p.metrics.learnedIDs.Inc()
	}
	if id != "" || end || full {
		x.learned = true
		x.head = nil
	}
}

// createdID is the response id of the response.created event among the
// complete lines of an event stream's beginning, "" when none came yet.
func createdID(head []byte) string {
	if !bytes.Contains(head, []byte(`"response.created"`)) {
		return ""
	}
	for line := range bytes.Lines(head) {
		if !bytes.HasSuffix(line, []byte("\n")) {
			break // the line is not whole yet
		}
		data, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("data:"))
		if !ok {
			continue
		}
		r := gjson.ParseBytes(bytes.TrimSpace(data))
		if r.Get("type").Str == "response.created" {
			if id := r.Get("response.id"); id.Type == gjson.String {
				return id.Str
			}
		}
	}
	return ""
}
