package config

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// origin is where a setting's value came from.
type origin struct {
	flag, env string
	key, path string
	line      int
}

// name says where a value came from, as the start of a message.
func (o origin) name() string {
	switch {
	case o.flag != "":
		return "--" + o.flag
	case o.env != "":
		return o.env
	}
	return fmt.Sprintf("%s:%d: %s", o.path, o.line, o.key)
}

// Flags are one command's flags, made from Table.
type Flags struct {
	fs  *flag.FlagSet
	cmd Cmd
}

// listFlag is a repeatable flag of comma-separated values.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	*l = append(*l, splitList(v)...)
	return nil
}

// RegisterFlags defines cmd's flags on fs, with the defaults that --help
// shows; a flag overrides the file and the environment only when given.
func RegisterFlags(fs *flag.FlagSet, cmd Cmd) *Flags {
	for _, e := range Table {
		if e.Flag == "" || e.Cmds&cmd == 0 {
			continue
		}
		switch e.wants() {
		case "true or false":
			fs.Bool(e.Flag, e.Default == "true", e.Doc)
		case "a duration":
			d, _ := time.ParseDuration(e.Default)
			fs.Duration(e.Flag, d, e.Doc)
		case "an integer":
			n, _ := strconv.ParseInt(e.Default, 10, 64)
			fs.Int64(e.Flag, n, e.Doc)
		case "a number":
			x, _ := strconv.ParseFloat(e.Default, 64)
			fs.Float64(e.Flag, x, e.Doc)
		case "a list":
			fs.Var(new(listFlag), e.Flag, e.Doc)
		default:
			fs.String(e.Flag, e.Default, e.Doc)
		}
	}
	return &Flags{fs: fs, cmd: cmd}
}

// entryByFlag finds the entry of one of cmd's flags.
func entryByFlag(name string, cmd Cmd) (Entry, bool) {
	for _, e := range Table {
		if e.Flag == name && e.Cmds&cmd != 0 {
			return e, true
		}
	}
	return Entry{}, false
}

// Load builds the settings: the file --config names, then PREFIXGATE_*
// variables from lookup (os.LookupEnv in production), then the flags
// given, then the command's own defaults. It validates the result as the
// owning packages do and names the flag, variable or file line a rejected
// value came from. The tenants' secret is read through lookup too.
func (fl *Flags) Load(lookup func(string) (string, bool)) (Settings, error) {
	var s Settings
	given := map[string]origin{}
	if path := fl.fs.Lookup("config").Value.String(); path != "" {
		if err := loadFile(path, &s, given); err != nil {
			return s, err
		}
	}
	if err := applyEnv(&s, lookup, given); err != nil {
		return s, err
	}
	var errs []error
	fl.fs.Visit(func(f *flag.Flag) {
		e, ok := entryByFlag(f.Name, fl.cmd)
		if !ok {
			return // a flag of the command's own, not a setting
		}
		given[e.Field] = origin{flag: f.Name}
		if err := e.setString(&s, f.Value.String()); err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", f.Name, err))
		}
	})
	if err := errors.Join(errs...); err != nil {
		return s, err
	}
	s.fillDefaults(given)
	s.Server.Pipeline.SettingName = func(field string) string { return SettingName("Pipeline." + field) }
	if err := s.check(lookup); err != nil {
		return s, explain(err, given)
	}
	if err := s.Server.Defaults().Validate(); err != nil {
		return s, explain(fmt.Errorf("Server.%w", err), given)
	}
	return s, nil
}

// applyEnv sets every setting whose variable lookup finds.
func applyEnv(s *Settings, lookup func(string) (string, bool), given map[string]origin) error {
	var errs []error
	for _, e := range Table {
		v, ok := "", false
		if e.Env != "" {
			v, ok = lookup(e.Env)
		}
		if !ok {
			continue
		}
		given[e.Field] = origin{env: e.Env}
		if err := e.setString(s, v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", e.Env, err))
		}
	}
	return errors.Join(errs...)
}

// fillDefaults gives the command's own settings (not the server's, whose
// packages apply their defaults) their defaults where they are zero, as
// an empty or zero value of the server's settings means its default.
func (s *Settings) fillDefaults(given map[string]origin) {
	for _, e := range Table {
		if e.set != nil || e.Default == "" || strings.HasPrefix(e.Field, "Server.") || !field(s, e.Field).IsZero() {
			continue
		}
		if _, set := given[e.Field]; set && e.keepZero {
			continue
		}
		_ = e.setString(s, e.Default)
	}
}

// check validates the command's own settings and reads the tenants'
// secret; messages start with the field's name.
func (s *Settings) check(lookup func(string) (string, bool)) error {
	if (s.TLSCertFile == "") != (s.TLSKeyFile == "") {
		return errors.New("tls: set both cert_file and key_file (--tls-cert and --tls-key), or neither")
	}
	if s.LogFormat != "text" && s.LogFormat != "json" {
		return fmt.Errorf("LogFormat: %q is not text or json", s.LogFormat)
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, s.LogLevel) {
		return fmt.Errorf("LogLevel: %q is not debug, info, warn or error", s.LogLevel)
	}
	if s.DrainTimeout < 0 {
		return errors.New("DrainTimeout: must not be negative")
	}
	s.Server.TraceEndpoint = strings.TrimSuffix(s.Server.TraceEndpoint, "/")
	if len(s.Server.Pipeline.Tenants) == 0 {
		return nil
	}
	// Short keys are guessed; the server takes any key, the operator's
	// file does not.
	for key, tenant := range s.Server.Pipeline.Tenants {
		if len(key) < 16 {
			return fmt.Errorf("Server.Pipeline.Tenants: a key for tenant %q is shorter than 16 characters", tenant)
		}
	}
	if s.TenantSecretEnv == "" {
		return errors.New("TenantSecretEnv: required when tenants.api_keys is set")
	}
	secret, ok := lookup(s.TenantSecretEnv)
	if !ok || len(secret) < 16 {
		return fmt.Errorf("TenantSecretEnv: environment variable %s must hold a secret of at least 16 characters", s.TenantSecretEnv)
	}
	s.Server.Pipeline.TenantSecret = []byte(secret)
	return nil
}

var fieldPrefix = regexp.MustCompile(`^([A-Z][A-Za-z0-9.]*): `)

// explain rewrites an error that starts with a Settings field's name to
// start with where the value came from: the flag, the variable, or the
// file's line and key; a value nobody set is named by its key.
func explain(err error, given map[string]origin) error {
	m := fieldPrefix.FindStringSubmatch(err.Error())
	if m == nil {
		return explainKey(err, given)
	}
	rest := strings.TrimPrefix(err.Error(), m[0])
	if o, ok := given[m[1]]; ok {
		return fmt.Errorf("%s: %s", o.name(), rest)
	}
	for _, e := range Table {
		if e.Field == m[1] {
			return fmt.Errorf("%s: %s", cmp.Or(e.Key, "--"+e.Flag), rest)
		}
	}
	return err
}

// explainKey rewrites an error that starts with a file key (a package
// that names its settings by key, as flow control does: "Server." and
// then flow_control.objectives.x: ...) to start with where the value came
// from.
func explainKey(err error, given map[string]origin) error {
	msg := strings.TrimPrefix(err.Error(), "Server.")
	for _, e := range Table {
		if e.Key == "" || !strings.HasPrefix(msg, e.Key) || len(msg) == len(e.Key) || (msg[len(e.Key)] != '.' && msg[len(e.Key)] != ':') {
			continue
		}
		o, ok := given[e.Field]
		switch {
		case !ok:
			return errors.New(msg)
		case o.path != "":
			return fmt.Errorf("%s:%d: %s", o.path, o.line, msg)
		}
		return fmt.Errorf("%s: %s", o.name(), msg)
	}
	return err
}

// SettingName names the setting of a server.Config field (Pipeline.MaxBodyBytes)
// by its flag, file key and variable, for messages that say what raises a
// limit.
func SettingName(serverField string) string {
	for _, e := range Table {
		if e.Field != "Server."+serverField {
			continue
		}
		var names []string
		if e.Flag != "" {
			names = append(names, "--"+e.Flag)
		}
		if e.Key != "" {
			names = append(names, e.Key)
		}
		if e.Env != "" {
			names = append(names, e.Env)
		}
		return strings.Join(names, ", ")
	}
	return "server.Config." + serverField
}
