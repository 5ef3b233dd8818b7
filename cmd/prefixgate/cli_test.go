package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/prefixgate/prefixgate/route"
)

func runMain(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// cliCommands are the subcommands this file checks; sim's flag handling
// lives in sim.go and is tested with it.
var cliCommands = []string{"serve", "demo", "normalize", "lint", "vllmsim", "bench"}

func TestHelpGoesToStdout(t *testing.T) {
	for _, c := range cliCommands {
		for _, args := range [][]string{{c, "--help"}, {c, "-h"}, {"help", c}} {
			code, out, errs := runMain(t, args...)
			if code != 0 || errs != "" || !strings.Contains(strings.ToLower(out), "usage: prefixgate "+c) || !strings.Contains(out, "-") {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want usage on stdout, exit 0", args, code, clipString(out), errs)
			}
		}
		_, viaHelp, _ := runMain(t, "help", c)
		_, viaFlag, _ := runMain(t, c, "--help")
		if viaHelp != viaFlag {
			t.Errorf("help %s differs from %s --help", c, c)
		}
	}
	for _, args := range [][]string{{"--help"}, {"help"}, {"-h"}} {
		if code, out, errs := runMain(t, args...); code != 0 || errs != "" || !strings.Contains(out, "Commands:") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs)
		}
	}
}

func TestVersion(t *testing.T) {
	for _, a := range []string{"--version", "version"} {
		code, out, errs := runMain(t, a)
		if code != 0 || errs != "" || !strings.HasPrefix(out, "prefixgate ") || strings.TrimSpace(out) == "prefixgate" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", a, code, out, errs)
		}
	}
}

func clipString(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// TestUsageErrors: every usage error exits 2 with a short message on
// stderr that names the problem, never the whole flag list.
func TestUsageErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.json")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--polcy", "random"}, "unknown flag --polcy (did you mean --policy?)"},
		{[]string{"serve", "--prefix-lenght", "2048"}, "did you mean --prefix-length?"},
		{[]string{"lint", "--replica", "3"}, "did you mean --replicas?"},
		{[]string{"normalize", "--keys"}, "did you mean --key?"},
		{[]string{"vllmsim", "--replica", "2"}, "did you mean --replicas?"},
		{[]string{"bench", "--concurency", "2"}, "did you mean --concurrency?"},
		{[]string{"demo", "--polices", "random"}, "did you mean --policies?"},
		{[]string{"lint", "--replicas", "many"}, `invalid value "many" for flag --replicas`},
		{[]string{"lint", "--mode"}, "flag needs an argument: --mode"},
		{[]string{"normalize", missing}, "missing.json"},
		{[]string{"lint", missing}, "missing.json"},
		{[]string{"demo", "--policies", "random,foo"}, `--policies: "foo" is not a routing policy`},
		{[]string{"serve", "--backend", "http://127.0.0.1:9", "--policy", "foo"}, `--policy: "foo" is not a routing policy`},
		{[]string{"bench", "extra"}, `unexpected argument "extra"`},
		{[]string{"servee"}, "did you mean serve?"},
	}
	for _, c := range cases {
		code, out, errs := runMain(t, c.args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", c.args, code, errs)
		}
		if !strings.Contains(errs, c.want) {
			t.Errorf("%v: stderr %q, want it to say %q", c.args, errs, c.want)
		}
		if n := strings.Count(errs, "\n"); n > 3 {
			t.Errorf("%v: %d lines on stderr, want a short message:\n%s", c.args, n, errs)
		}
		if strings.Contains(errs, "running each policy") || strings.Contains(out, "policy") {
			t.Errorf("%v: announced a run before checking its flags:\n%s%s", c.args, out, errs)
		}
		for _, goName := range []string{"route: config", "config.Routing", "not found in type"} {
			if strings.Contains(errs, goName) {
				t.Errorf("%v: stderr shows a Go name (%s): %s", c.args, goName, errs)
			}
		}
	}
}

// TestFlagsAfterArguments: flags may follow file arguments; "--" ends the
// flags.
func TestFlagsAfterArguments(t *testing.T) {
	dir := t.TempDir()
	body := filepath.Join(dir, "b.json")
	if err := os.WriteFile(body, []byte(`{"model":"m","prompt":"p"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, before, _ := runMain(t, "normalize", "--key", body)
	code, after, errs := runMain(t, "normalize", body, "--key")
	if code != 0 || after != before || len(after) != 17 {
		t.Errorf("normalize FILE --key: exit %d, %q (flags first: %q), stderr %q", code, after, before, errs)
	}
	dash := filepath.Join(dir, "--key")
	if err := os.WriteFile(dash, []byte(`{"b":1,"a":2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runMain(t, "normalize", "--", dash); code != 0 || out != `{"a":2,"b":1}`+"\n" {
		t.Errorf("normalize -- FILE: exit %d, %q, %q", code, out, errs)
	}
}

// TestServeConfigErrorsNameKeyAndLine: config-file errors name the YAML key
// and its line, and say which flag or variable set a value.
func TestServeConfigErrorsNameKeyAndLine(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	unknown := write("unknown.yaml", "backends: [http://127.0.0.1:9]\nrouting:\n  polcy: random\n")
	badType := write("type.yaml", "backends: [http://127.0.0.1:9]\nrouting:\n  threshold: lots\n")
	badPolicy := write("policy.yaml", "backends: [http://127.0.0.1:9]\nrouting:\n  policy: fastest\n")
	badFactor := write("factor.yaml", "backends: [http://127.0.0.1:9]\nrouting:\n  load_factor: 0.5\n")
	cases := []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--config", unknown}, "", unknown + ":3: routing.polcy: unknown key (did you mean routing.policy?)"},
		{[]string{"--config", badType}, "", badType + `:3: routing.threshold: "lots" is not an integer`},
		{[]string{"--config", badPolicy}, "", badPolicy + `:3: routing.policy: "fastest" is not a routing policy`},
		{[]string{"--config", badFactor}, "", badFactor + ":3: routing.load_factor: 0.5 is below 1"},
		{[]string{"--config", badFactor, "--load-factor", "0.9"}, "", "--load-factor: 0.9 is below 1"},
		{[]string{"--backend", "http://127.0.0.1:9"}, "PREFIXGATE_POLICY=fastest", `PREFIXGATE_POLICY: "fastest" is not a routing policy`},
		{[]string{"--backend", "http://127.0.0.1:9"}, "PREFIXGATE_LOG_LEVEL=loud", `PREFIXGATE_LOG_LEVEL: "loud" is not debug, info, warn or error`},
	}
	for _, c := range cases {
		if c.env != "" {
			k, v, _ := strings.Cut(c.env, "=")
			t.Setenv(k, v)
		}
		code, _, errs := runMain(t, append([]string{"serve"}, c.args...)...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("serve %v (%s): exit %d, stderr %q; want 2 and %q", c.args, c.env, code, errs, c.want)
		}
		if c.env != "" {
			k, _, _ := strings.Cut(c.env, "=")
			os.Unsetenv(k)
		}
	}
}

// TestServeLogLevelAndPolicy runs the router as a process: the start-up
// line shows the policy in effect when none is configured, and
// PREFIXGATE_LOG_LEVEL=warn silences info lines.
func TestServeLogLevelAndPolicy(t *testing.T) {
	fleet := startFleet(t, 1)
	for _, level := range []string{"", "warn"} {
		addr := freeAddr(t)
		cmd := exec.Command(binary(t), "serve", "--listen", addr, "--backend", fleet.URLs()[0])
		cmd.Env = append(os.Environ(), "PREFIXGATE_LOG_LEVEL="+level)
		if level == "" {
			cmd.Env = os.Environ()
		}
		logs := &lockedBuffer{}
		cmd.Stderr = logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "router listening", func() bool { _, _, err := chat("http://"+addr, "hello?"); return err == nil })
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("level %q: %v\n%s", level, err, logs)
		}
		out := logs.String()
		switch level {
		case "":
			if !strings.Contains(out, "msg=serving") || !strings.Contains(out, "policy="+route.DefaultPolicy) {
				t.Errorf("default level: start-up line without the effective policy:\n%s", out)
			}
		case "warn":
			if strings.Contains(out, "level=INFO") {
				t.Errorf("PREFIXGATE_LOG_LEVEL=warn still logs info lines:\n%s", out)
			}
		}
	}
}

// TestErrorsWithoutPackageNames: errors from packages keep their message
// but not the package's name.
func TestErrorsWithoutPackageNames(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--rate", "1"}, "prefixgate bench: --url is required\n"},
		{[]string{"vllmsim", "--preset", "nope"}, `prefixgate vllmsim: unknown preset "nope"`},
	} {
		code, _, errs := runMain(t, c.args...)
		if code != 2 || !strings.HasPrefix(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errs, c.want)
		}
	}
}
