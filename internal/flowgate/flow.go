package flowgate

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/prefixgate/prefixgate/internal/flowcontrol"
	"github.com/prefixgate/prefixgate/internal/pipeline"
)

// Headers is what flow identification reads of a request: http.Header,
// or a front door's own view of its metadata.
type Headers interface{ Get(name string) string }

// Identity is who a request is and what it asked for.
type Identity struct {
	Flow flowcontrol.Flow
	// Objective is the objective asked for (header or tenant default).
	Objective string
	// Capped is true when the tenant's ceiling lowered the priority.
	Capped bool
}

// Identify finds a request's flow: the fairness id is tenant when API keys
// are configured (tenant is not empty), else the first present of the
// fairness headers (the two standard ones, then the configured one), else
// group, else "default"; the priority comes from the objective header,
// else the fairness id's default objective, else 0. An unknown objective
// or an overlong header, or one with a byte outside printable ASCII, is a
// 400 *pipeline.Error naming the header.
func (g *Gate) Identify(h Headers, tenant, group string) (Identity, error) {
	c := g.c.Load()
	id, err := fairnessID(h, c.cfg.FairnessHeader, tenant, group)
	if err != nil {
		return Identity{}, err
	}
	obj, objHeader := h.Get(ObjectiveHeader), ObjectiveHeader
	if obj == "" {
		obj, objHeader = h.Get(GatewayObjectiveHeader), GatewayObjectiveHeader
	}
	res, err := c.policy.Resolve(id, obj)
	if err != nil {
		if errors.Is(err, flowcontrol.ErrUnknownObjective) {
			return Identity{}, &pipeline.Error{Status: http.StatusBadRequest, Code: "unknown_objective", Param: objHeader,
				Message: "header " + objHeader + ": " + err.Error()}
		}
		return Identity{}, err
	}
	if res.Objective == "" {
		res.Objective = c.policy.ObjectiveName(res.Priority)
	}
	return Identity{Flow: flowcontrol.Flow{FairnessID: id, Priority: res.Priority}, Objective: res.Objective, Capped: res.Capped}, nil
}

// fairnessID is the request's fairness id; extra is the configured
// header (flow_control.fairness_header), "" for none.
func fairnessID(h Headers, extra, tenant, group string) (string, error) {
	if tenant != "" {
		return tenant, nil
	}
	for _, name := range [...]string{FairnessHeader, GatewayFairnessHeader, extra} {
		if name == "" {
			continue
		}
		if v := h.Get(name); v != "" {
			if len(v) > flowcontrol.MaxNameLen {
				return "", &pipeline.Error{Status: http.StatusBadRequest, Code: "invalid_fairness_id", Param: name,
					Message: fmt.Sprintf("header %s: a fairness id of %d bytes is longer than %d", name, len(v), flowcontrol.MaxNameLen)}
			}
			// Printable ASCII only: the id becomes a metrics label, which
			// must be valid UTF-8, and a log field.
			for i := 0; i < len(v); i++ {
				if c := v[i]; c < 0x20 || c > 0x7e {
					return "", &pipeline.Error{Status: http.StatusBadRequest, Code: "invalid_fairness_id", Param: name,
						Message: fmt.Sprintf("header %s: a fairness id has a non-printable byte 0x%02x at %d (printable ASCII only)", name, c, i)}
				}
			}
			return v, nil
		}
	}
	if group != "" {
		return group, nil
	}
	return DefaultFairnessID, nil
}
