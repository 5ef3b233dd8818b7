package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
	"github.com/prefixgate/prefixgate/internal/server"
)

// The front door end to end: one `prefixgate vllmsim` process serving three
// replicas, `prefixgate serve` in front of it, and the official OpenAI and
// Anthropic Python SDKs (testdata/frontdoor_sdks.py, run by the Python that
// PREFIXGATE_E2E_PYTHON names) and curl talking to the router. Every process
// runs under one deadline and is stopped by its pid at the end.

const frontDoorModel = "vllmsim/tiny"

// frontDoorDeadline bounds the whole test, processes included; the SDK
// script takes about 35 s on a loaded two-core machine.
const frontDoorDeadline = 5 * time.Minute

// e2ePython is the Python with the SDKs, or a skip (a failure when
// PREFIXGATE_REQUIRE_TOOLS is set, as `make test` sets it).
func e2ePython(t *testing.T) string {
	t.Helper()
	py := os.Getenv(pythonEnv)
	if py == "" {
		if os.Getenv("PREFIXGATE_REQUIRE_TOOLS") != "" {
			t.Fatalf("PREFIXGATE_REQUIRE_TOOLS is set but %s is not: the Makefile points it at the Python test venv", pythonEnv)
		}
		t.Skipf("set %s to a python with the openai and anthropic packages (make test does)", pythonEnv)
	}
	return py
}

// startUnder starts the built binary with args under ctx and stops it by
// its pid at cleanup: SIGTERM, then a kill if it has not ended in 20 s. It
// returns the process, its standard output and its standard error as read
// so far.
func startUnder(ctx context.Context, t *testing.T, args ...string) (*exec.Cmd, io.Reader, *lockedBuffer) {
	t.Helper()
	cmd := exec.CommandContext(ctx, binary(t), args...)
	logs := &lockedBuffer{}
	cmd.Stderr = logs
	cmd.WaitDelay = 20 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState != nil {
			return
		}
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	return cmd, stdout, logs
}

// frontDoorFleet starts three simulated replicas in one process and the
// router in front of them; it returns the router's base URL and the
// replicas' host:port addresses.
func frontDoorFleet(ctx context.Context, t *testing.T) (base string, replicas []string, router *exec.Cmd, logs *lockedBuffer) {
	t.Helper()
	_, pr, simLogs := startUnder(ctx, t, "vllmsim", "--listen", "127.0.0.1:0", "--replicas", "3", "--preset", "tiny", "--speed", "50")
	lines := bufio.NewScanner(pr)
	for len(replicas) < 3 && lines.Scan() {
		replicas = append(replicas, strings.TrimPrefix(strings.TrimSpace(lines.Text()), "http://"))
	}
	if len(replicas) < 3 {
		t.Fatalf("vllmsim printed %d URLs of 3: %v\n%s", len(replicas), lines.Err(), simLogs.String())
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	addr := freeAddr(t)
	var backends []string
	for _, r := range replicas {
		backends = append(backends, "http://"+r)
	}
	router, routerOut, logs := startUnder(ctx, t, "serve", "--listen", addr, "--backend", strings.Join(backends, ","),
		"--probe-interval", "200ms", "--log-level", "warn")
	go func() { _, _ = io.Copy(io.Discard, routerOut) }()
	base = "http://" + addr
	// Ready, and every replica's model list read by the health probes:
	// /tokenize goes to a replica that serves the body's model.
	waitFor(t, "the router to list the model of all three replicas", func() bool {
		resp, err := http.Get(base + "/v1/models")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var list struct{ Data []struct{ ID string } }
		return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&list) == nil &&
			len(list.Data) > 0 && list.Data[0].ID == frontDoorModel && routerReady(base)
	})
	return base, replicas, router, logs
}

func routerReady(base string) bool {
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func TestFrontDoorOfficialSDKs(t *testing.T) {
	py := e2ePython(t)
	ctx, cancel := context.WithTimeout(context.Background(), frontDoorDeadline)
	defer cancel()
	base, replicas, router, logs := frontDoorFleet(ctx, t)
	defer func() {
		if t.Failed() {
			t.Logf("router log:\n%s", logs.String())
		}
	}()

	t.Run("curl", func(t *testing.T) { curlChecks(t, base, replicas) })

	script := exec.CommandContext(ctx, py, append([]string{filepath.Join("testdata", "frontdoor_sdks.py"), base}, prefixed("http://", replicas)...)...)
	var stderr bytes.Buffer
	script.Stderr = &stderr
	out, err := script.Output()
	if err != nil {
		t.Fatalf("frontdoor_sdks.py: %v\n%s", err, stderr.String())
	}
	var sections map[string]json.RawMessage
	if err := json.Unmarshal(out, &sections); err != nil {
		t.Fatalf("frontdoor_sdks.py printed no JSON object: %v\n%s\n%s", err, out, stderr.String())
	}
	checks := map[string]func(*testing.T, sdkResult){
		"responses_plain":             checkResponsesPlain,
		"responses_streamed":          checkResponsesStreamed,
		"responses_stream_helper":     checkResponsesStreamHelper,
		"responses_unknown_id":        checkResponsesUnknownID,
		"responses_background_cancel": checkResponsesBackgroundCancel,
		"chains":                      checkChains,
		"embeddings":                  checkEmbeddings,
		"transcription":               checkTranscription,
		"messages_plain":              checkMessagesPlain,
		"messages_streamed":           checkMessagesStreamed,
		"messages_unknown_model":      checkMessagesUnknownModel,
	}
	for _, name := range slices.Sorted(maps.Keys(checks)) {
		t.Run(name, func(t *testing.T) {
			raw, ok := sections[name]
			if !ok {
				t.Fatalf("the script printed no section %q", name)
			}
			var res sdkResult
			if err := json.Unmarshal(raw, &res); err != nil {
				t.Fatalf("section %s: %v: %s", name, err, raw)
			}
			if res.Error != "" {
				t.Fatalf("the SDK raised:\n%s", res.Error)
			}
			res.replicas = replicas
			checks[name](t, res)
		})
	}

	// Each route's requests are counted under its own label, with the
	// replica that answered them (a cancel may be answered 400 by the replica
	// when its response finished first, so any status counts).
	t.Run("every route counted under its own label", func(t *testing.T) {
		answered := map[string]bool{}
		for _, line := range strings.Split(get(t, base+"/metrics"), "\n") {
			if strings.HasPrefix(line, "prefixgate_requests_total{") && !strings.Contains(line, `backend=""`) && !strings.HasSuffix(line, " 0") {
				if _, rest, ok := strings.Cut(line, `route="`); ok {
					route, _, _ := strings.Cut(rest, `"`)
					answered[route] = true
				}
			}
		}
		for _, route := range []string{"responses", "responses_get", "responses_cancel", "messages", "embeddings", "audio_transcriptions", "tokenize", "detokenize", "rerank", "score"} {
			if !answered[route] {
				t.Errorf("prefixgate_requests_total counts no answer from a replica under route=%q", route)
			}
		}
	})

	// The router drains and exits cleanly on SIGTERM.
	if err := syscall.Kill(router.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := router.Wait(); err != nil {
		t.Errorf("router after SIGTERM: %v", err)
	}
}

func prefixed(p string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = p + s
	}
	return out
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sdkResult is one section of the script's output; each check reads the
// members it needs.
type sdkResult struct {
	Error        string   `json:"error"`
	Status       int      `json:"status"`
	Backend      string   `json:"backend"`
	ID           string   `json:"id"`
	Object       string   `json:"object"`
	Type         string   `json:"type"`
	Role         string   `json:"role"`
	State        string   `json:"state"`
	Text         string   `json:"text"`
	StopReason   string   `json:"stop_reason"`
	OutputTokens int      `json:"output_tokens"`
	InputTokens  int      `json:"input_tokens"`
	Types        []string `json:"types"`
	Code         string   `json:"code"`
	Param        string   `json:"param"`
	Class        string   `json:"class"`
	ErrorType    string   `json:"error_type"`

	// responses_streamed
	Sequence      []int  `json:"sequence"`
	Deltas        string `json:"deltas"`
	ContentType   string `json:"content_type"`
	DoneText      string `json:"done_text"`
	CompletedText string `json:"completed_text"`
	CompletedID   string `json:"completed_id"`
	FollowUp      struct {
		Status   int    `json:"status"`
		Backend  string `json:"backend"`
		Previous string `json:"previous"`
	} `json:"follow_up"`
	Retrieve struct {
		Status  int    `json:"status"`
		Backend string `json:"backend"`
		ID      string `json:"id"`
		Text    string `json:"text"`
	} `json:"retrieve"`

	// responses_background_cancel
	StoredOn  string `json:"stored_on"`
	Queued    string `json:"queued"`
	CreatedID string `json:"created_id"`

	// chains
	FollowUps int         `json:"follow_ups"`
	Router    chainResult `json:"router"`
	Random    chainResult `json:"random"`

	// embeddings
	Count int       `json:"count"`
	Dims  []int     `json:"dims"`
	Norms []float64 `json:"norms"`

	// transcription
	Duration    float64 `json:"duration"`
	VerboseText string  `json:"verbose_text"`

	// messages_streamed
	HelperText        string `json:"helper_text"`
	FinalText         string `json:"final_text"`
	FinalStopReason   string `json:"final_stop_reason"`
	FinalOutputTokens int    `json:"final_output_tokens"`

	replicas []string
}

type chainResult struct {
	Answered     int            `json:"answered"`
	Failed       int            `json:"failed"`
	Misplaced    int            `json:"misplaced"`
	Errors       map[string]int `json:"errors"`
	ReplicasUsed int            `json:"replicas_used"`
}

// answeredByReplica fails unless a 200 came from one of the fleet's
// replicas, named in X-Prefixgate-Backend.
func answeredByReplica(t *testing.T, what string, status int, backend string, replicas []string) {
	t.Helper()
	if status != http.StatusOK || !slices.Contains(replicas, backend) {
		t.Errorf("%s: status %d from backend %q; want 200 from one of %v", what, status, backend, replicas)
	}
}

// eventsMatch reports whether types is head, then one or more of repeated,
// then tail.
func eventsMatch(types, head []string, repeated string, tail []string) bool {
	if len(types) < len(head)+1+len(tail) || !slices.Equal(types[:len(head)], head) || !slices.Equal(types[len(types)-len(tail):], tail) {
		return false
	}
	for _, ty := range types[len(head) : len(types)-len(tail)] {
		if ty != repeated {
			return false
		}
	}
	return true
}

var (
	responseEventsHead = []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"}
	responseEventsTail = []string{"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"}
)

func checkResponsesPlain(t *testing.T, r sdkResult) {
	answeredByReplica(t, "responses.create", r.Status, r.Backend, r.replicas)
	if r.Object != "response" || r.State != "completed" || !strings.HasPrefix(r.ID, "resp_") || r.Text != vllmsim.OutputText(0, 4) || r.OutputTokens != 4 || r.InputTokens == 0 {
		t.Errorf("responses.create answered %+v; want a completed response of 4 output tokens %q", r, vllmsim.OutputText(0, 4))
	}
}

func checkResponsesStreamed(t *testing.T, r sdkResult) {
	answeredByReplica(t, "responses.create(stream=True)", r.Status, r.Backend, r.replicas)
	if !strings.HasPrefix(r.ContentType, "text/event-stream") {
		t.Errorf("Content-Type %q", r.ContentType)
	}
	if !eventsMatch(r.Types, responseEventsHead, "response.output_text.delta", responseEventsTail) {
		t.Errorf("event types %v", r.Types)
	}
	for i, n := range r.Sequence {
		if n != i {
			t.Errorf("sequence numbers %v; want 0, 1, 2, …", r.Sequence)
			break
		}
	}
	want := vllmsim.OutputText(0, 6)
	if r.Deltas != want || r.DoneText != want || r.CompletedText != want || r.CompletedID != r.ID || r.OutputTokens != 6 {
		t.Errorf("deltas %q, done %q, completed %q (id %q of %q, %d tokens); want %q", r.Deltas, r.DoneText, r.CompletedText, r.CompletedID, r.ID, r.OutputTokens, want)
	}
	if r.FollowUp.Status != http.StatusOK || r.FollowUp.Backend != r.Backend || r.FollowUp.Previous != r.ID {
		t.Errorf("a follow-up naming the streamed response %s (stored on %s): %+v", r.ID, r.Backend, r.FollowUp)
	}
	if r.Retrieve.Status != http.StatusOK || r.Retrieve.Backend != r.Backend || r.Retrieve.ID != r.ID || r.Retrieve.Text != want {
		t.Errorf("responses.retrieve of %s (stored on %s): %+v", r.ID, r.Backend, r.Retrieve)
	}
}

func checkResponsesStreamHelper(t *testing.T, r sdkResult) {
	if !eventsMatch(r.Types, responseEventsHead, "response.output_text.delta", responseEventsTail) {
		t.Errorf("event types %v", r.Types)
	}
	if r.Text != vllmsim.OutputText(0, 5) || r.State != "completed" || !strings.HasPrefix(r.ID, "resp_") {
		t.Errorf("final response %q (%s, id %q); want %q completed", r.Text, r.State, r.ID, vllmsim.OutputText(0, 5))
	}
}

func checkResponsesBackgroundCancel(t *testing.T, r sdkResult) {
	if r.Queued != "queued" || !slices.Contains(r.replicas, r.StoredOn) {
		t.Fatalf("a background response: %+v; want it queued on a replica", r)
	}
	if r.Status == http.StatusBadRequest && r.Backend == r.StoredOn && strings.Contains(r.Text, "Cannot cancel") {
		t.Logf("the background response finished before its cancel; the cancel reached %s, which stored it", r.Backend)
		return
	}
	if r.Status != http.StatusOK || r.Backend != r.StoredOn || r.State != "cancelled" || r.ID != r.CreatedID {
		t.Errorf("a background response stored on %s, cancelled through the router: %+v; want it cancelled on %s", r.StoredOn, r, r.StoredOn)
	}
}

func checkResponsesUnknownID(t *testing.T, r sdkResult) {
	if r.Status != http.StatusNotFound || r.Code != "response_not_found" || r.Param != "previous_response_id" || r.Type != "invalid_request_error" {
		t.Errorf("a follow-up naming an id nobody stored: %+v; want openai.NotFoundError response_not_found on previous_response_id", r)
	}
}

func checkChains(t *testing.T, r sdkResult) {
	t.Logf("follow-ups answered: through prefixgate %d/%d (%d on another replica than their predecessor's, chains on %d replicas); to a replica drawn at random %d/%d (failures %v)",
		r.Router.Answered, r.FollowUps, r.Router.Misplaced, r.Router.ReplicasUsed, r.Random.Answered, r.FollowUps, r.Random.Errors)
	if r.FollowUps != 200 || r.Router.Answered != 200 || r.Router.Failed != 0 || r.Router.Misplaced != 0 {
		t.Errorf("through the router: %+v of %d follow-ups; want every one answered by the replica that stored its predecessor", r.Router, r.FollowUps)
	}
	if r.Router.ReplicasUsed < 2 {
		t.Errorf("the 20 chains all went to %d replica: the test measures nothing", r.Router.ReplicasUsed)
	}
	if r.Random.Answered >= r.Router.Answered || r.Random.Answered+r.Random.Failed != r.FollowUps {
		t.Errorf("at random: %+v; want fewer answered than through the router", r.Random)
	}
}

func checkEmbeddings(t *testing.T, r sdkResult) {
	answeredByReplica(t, "embeddings.create", r.Status, r.Backend, r.replicas)
	if r.Count != 2 || len(r.Dims) != 2 || r.Dims[0] != vllmsim.EmbeddingDim || r.Dims[1] != vllmsim.EmbeddingDim {
		t.Fatalf("embeddings: %d vectors of %v dimensions; want 2 of %d", r.Count, r.Dims, vllmsim.EmbeddingDim)
	}
	for _, n := range r.Norms {
		if math.Abs(n-1) > 1e-4 {
			t.Errorf("an embedding's norm is %v; want 1 (decoded from the SDK's base64)", n)
		}
	}
}

func checkTranscription(t *testing.T, r sdkResult) {
	answeredByReplica(t, "audio.transcriptions.create", r.Status, r.Backend, r.replicas)
	// One second of audio: ceil(2.5 × 1) tokens of transcript.
	if want := vllmsim.OutputText(0, 3); r.Text != want || r.VerboseText != want || r.Duration != 1 {
		t.Errorf("transcript %q (verbose %q, %v s); want %q of a 1 s WAV", r.Text, r.VerboseText, r.Duration, want)
	}
}

func checkMessagesPlain(t *testing.T, r sdkResult) {
	answeredByReplica(t, "messages.create", r.Status, r.Backend, r.replicas)
	if r.Type != "message" || r.Role != "assistant" || r.Text != vllmsim.OutputText(0, 4) || r.StopReason != "max_tokens" || r.OutputTokens != 4 || r.InputTokens == 0 {
		t.Errorf("messages.create answered %+v; want an assistant message of 4 tokens %q", r, vllmsim.OutputText(0, 4))
	}
}

func checkMessagesStreamed(t *testing.T, r sdkResult) {
	want := vllmsim.OutputText(0, 6)
	if r.HelperText != want || r.FinalText != want || r.FinalStopReason != "max_tokens" || r.FinalOutputTokens != 6 {
		t.Errorf("messages.stream: text_stream %q, final message %q (%s, %d tokens); want %q", r.HelperText, r.FinalText, r.FinalStopReason, r.FinalOutputTokens, want)
	}
	if !eventsMatch(r.Types, []string{"message_start", "content_block_start"}, "content_block_delta", []string{"content_block_stop", "message_delta", "message_stop"}) || r.Deltas != want {
		t.Errorf("messages.create(stream=True): events %v, text %q", r.Types, r.Deltas)
	}
}

func checkMessagesUnknownModel(t *testing.T, r sdkResult) {
	if r.Status != http.StatusNotFound || r.Class != "NotFoundError" || r.Type != "error" || r.ErrorType != "not_found_error" {
		t.Errorf("an unknown model on /v1/messages: %+v; want anthropic.NotFoundError in Anthropic's error shape", r)
	}
}

// curlChecks sends /tokenize, /detokenize, /rerank and /score bodies as a
// user would with curl (real curl when it is on PATH, else net/http) and
// checks the answers against vllmsim's tokenizer and scores.
func curlChecks(t *testing.T, base string, replicas []string) {
	send := curlPost(t)
	var tok struct {
		Count     int      `json:"count"`
		Tokens    []uint32 `json:"tokens"`
		TokenStrs []string `json:"token_strs"`
	}
	prompt := "Routing by prefix keeps caches warm."
	send(t, base+"/tokenize", map[string]any{"model": frontDoorModel, "prompt": prompt, "return_token_strs": true}, replicas, &tok)
	if tok.Count != len(tok.Tokens) || tok.Count != len(vllmsim.Tokenize(prompt)) || strings.Join(tok.TokenStrs, "") != prompt {
		t.Errorf("/tokenize: %+v; want the %d tokens of %q", tok, len(vllmsim.Tokenize(prompt)), prompt)
	}
	var detok struct{ Prompt string }
	send(t, base+"/detokenize", map[string]any{"model": frontDoorModel, "tokens": tok.Tokens}, replicas, &detok)
	if detok.Prompt != prompt {
		t.Errorf("/detokenize gave %q; want %q", detok.Prompt, prompt)
	}
	query := "which replica holds the prefix"
	docs := []string{"the cache is cold", "the replica that holds the prefix answers fastest", "which replica"}
	for _, path := range []string{"/rerank", "/v1/rerank", "/v2/rerank"} {
		var rr struct {
			Results []struct {
				Index          int     `json:"index"`
				RelevanceScore float64 `json:"relevance_score"`
			} `json:"results"`
		}
		send(t, base+path, map[string]any{"model": frontDoorModel, "query": query, "documents": docs, "top_n": 2}, replicas, &rr)
		if len(rr.Results) != 2 || rr.Results[0].RelevanceScore < rr.Results[1].RelevanceScore ||
			rr.Results[0].RelevanceScore != vllmsim.Score(query, docs[rr.Results[0].Index]) {
			t.Errorf("%s: %+v; want the two best of %d documents, best first, scored as vllmsim.Score", path, rr.Results, len(docs))
		}
	}
	for _, path := range []string{"/score", "/v1/score"} {
		var sc struct {
			Data []struct {
				Index int     `json:"index"`
				Score float64 `json:"score"`
			} `json:"data"`
		}
		send(t, base+path, map[string]any{"model": frontDoorModel, "text_1": query, "text_2": docs}, replicas, &sc)
		if len(sc.Data) != len(docs) {
			t.Fatalf("%s: %d scores for %d documents", path, len(sc.Data), len(docs))
		}
		for _, d := range sc.Data {
			if d.Score != vllmsim.Score(query, docs[d.Index]) {
				t.Errorf("%s: document %d scored %v; want %v", path, d.Index, d.Score, vllmsim.Score(query, docs[d.Index]))
			}
		}
	}
}

// curlPost returns a function that POSTs body as JSON to url, checks that a
// replica of the fleet answered 200, and decodes the answer into out.
func curlPost(t *testing.T) func(t *testing.T, url string, body any, replicas []string, out any) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Log("curl is not on PATH: sending with net/http")
	}
	return func(t *testing.T, url string, body any, replicas []string, out any) {
		t.Helper()
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		var status int
		var backend string
		var answer []byte
		if curl != "" {
			status, backend, answer = viaCurl(t, curl, url, data)
		} else {
			status, backend, answer = viaNetHTTP(t, url, data)
		}
		answeredByReplica(t, url, status, backend, replicas)
		if err := json.Unmarshal(answer, out); err != nil {
			t.Fatalf("%s: %v: %s", url, err, answer)
		}
	}
}

func viaCurl(t *testing.T, curl, url string, body []byte) (status int, backend string, answer []byte) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), curl, "-sS", "-i", "-H", "Content-Type: application/json", "--data-binary", "@-", url)
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("curl %s: %v\n%s", url, err, ee.Stderr)
		}
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(out)), nil)
	if err != nil {
		t.Fatalf("curl %s printed no HTTP response: %v\n%s", url, err, out)
	}
	defer resp.Body.Close()
	answer, err = io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get(server.BackendHeader), answer
}

func viaNetHTTP(t *testing.T, url string, body []byte) (status int, backend string, answer []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, err = io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(fmt.Errorf("%s: %w", url, err))
	}
	return resp.StatusCode, resp.Header.Get(server.BackendHeader), answer
}
