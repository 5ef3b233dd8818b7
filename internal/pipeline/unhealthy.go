package pipeline

import (
	"fmt"
	"slices"
	"strings"

	"github.com/prefixgate/prefixgate/route"
)

// healthNamer is a member that names its health with its cause, as
// backends.Backend does: "ejected 12s ago: probe: GET /health: dial tcp
// 10.0.0.5:8000: connect: connection refused".
type healthNamer interface{ HealthName() string }

// maxNamedUnhealthy is how many backends a no-healthy-backend message
// names; the rest are counted.
const maxNamedUnhealthy = 3

// WhyNoneHealthy says why no member serving model is a candidate: each
// such member's name and health, at most maxNamedUnhealthy of them. model
// "" means every member; a member with no model list serves any model.
func WhyNoneHealthy(members []route.MemberStatus, model string) string {
	var named []string
	more := 0
	for _, m := range members {
		if m.Healthy || model != "" && len(m.Models) > 0 && !slices.Contains(m.Models, model) {
			continue
		}
		if len(named) == maxNamedUnhealthy {
			more++
			continue
		}
		why := "not healthy"
		if hn, ok := m.Member.(healthNamer); ok {
			why = hn.HealthName()
		}
		named = append(named, m.Name+" "+why)
	}
	if len(named) == 0 {
		return "every backend serving it is healthy again"
	}
	s := strings.Join(named, "; ")
	if more > 0 {
		s += fmt.Sprintf("; and %d more", more)
	}
	return s
}
