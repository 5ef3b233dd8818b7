package server

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Disaggregation's defaults.
const (
	// DefaultBootstrapPort is SGLang's --disaggregation-bootstrap-port
	// default, where a prefill worker's bootstrap server listens.
	DefaultBootstrapPort = 8998
	// DefaultPrefillTimeout bounds one prefill leg (the request's own
	// deadline bounds it too).
	DefaultPrefillTimeout = 60 * time.Second
	// DefaultPrefillRetries is how many other prefill workers a request
	// whose prefill leg failed tries before it runs aggregated on its
	// decode worker.
	DefaultPrefillRetries = 1
)

// The wire protocols of a split request (DisaggConfig.Protocol).
const (
	// ProtocolAuto takes the protocol from the prefill worker's engine:
	// SGLang's bootstrap for SGLang, vLLM's KV connector for the rest.
	ProtocolAuto = "auto"
	// ProtocolVLLM is vLLM's KV connector in two phases: the prefill leg
	// with max_tokens 1 and kv_transfer_params, then the decode leg with
	// the prefill answer's kv_transfer_params.
	ProtocolVLLM = "vllm"
	// ProtocolSGLang is SGLang's bootstrap: both legs at once with
	// bootstrap_host, bootstrap_port and bootstrap_room.
	ProtocolSGLang = "sglang"
)

// The split decisions (DisaggConfig.Split).
const (
	// SplitCost splits a request when the cost model says moving its
	// prefill off the decode worker pays (route.SplitCost).
	SplitCost = "cost"
	// SplitAlways splits every generation request while a prefill worker
	// has room, as most disaggregated proxies do.
	SplitAlways = "always"
)

// DisaggConfig configures prefill/decode disaggregation, which is on when
// a backend names a role (prefill+URL, decode+URL).
type DisaggConfig struct {
	// Protocol is auto, vllm or sglang; "" is auto.
	Protocol string
	// Split is cost or always; "" is cost.
	Split string
	// BootstrapPort is the port of the prefill workers' SGLang bootstrap
	// servers; 0 is the one each worker's server info states, else
	// DefaultBootstrapPort; -1 each prefill worker's own HTTP port.
	BootstrapPort int
	// PrefillTimeout bounds one prefill leg; 0 is DefaultPrefillTimeout.
	PrefillTimeout time.Duration
	// PrefillRetries is how many other prefill workers a failed prefill
	// leg is retried on before the request runs aggregated on its decode
	// worker; nil or negative is DefaultPrefillRetries.
	PrefillRetries *int
}

// Defaults returns c with every unset field at its default.
func (c DisaggConfig) Defaults() DisaggConfig {
	if c.Protocol == "" {
		c.Protocol = ProtocolAuto
	}
	c.Protocol = strings.ToLower(c.Protocol)
	if c.Split == "" {
		c.Split = SplitCost
	}
	c.Split = strings.ToLower(c.Split)
	if c.PrefillTimeout == 0 {
		c.PrefillTimeout = DefaultPrefillTimeout
	}
	if c.PrefillRetries == nil || *c.PrefillRetries < 0 {
		c.PrefillRetries = new(DefaultPrefillRetries)
	}
	return c
}

// maxPrefillRetries bounds PrefillRetries: each retry is a whole prefill.
const maxPrefillRetries = 8

// Validate reports the first invalid field, its message starting with the
// field's name.
func (c DisaggConfig) Validate() error {
	switch c.Protocol {
	case "", ProtocolAuto, ProtocolVLLM, ProtocolSGLang:
	default:
		return fmt.Errorf("Protocol: %q is not auto, vllm or sglang", c.Protocol)
	}
	switch c.Split {
	case "", SplitCost, SplitAlways:
	default:
		return fmt.Errorf("Split: %q is not cost or always", c.Split)
	}
	if c.BootstrapPort < -1 || c.BootstrapPort > 65535 {
		return fmt.Errorf("BootstrapPort: %d is not a port (1..65535), or -1 for each prefill worker's own", c.BootstrapPort)
	}
	if c.PrefillTimeout < 0 {
		return errors.New("PrefillTimeout: negative")
	}
	if c.PrefillRetries != nil && *c.PrefillRetries > maxPrefillRetries {
		return fmt.Errorf("PrefillRetries: %d is over %d", *c.PrefillRetries, maxPrefillRetries)
	}
	return nil
}
