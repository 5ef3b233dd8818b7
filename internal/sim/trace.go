package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
)

// TraceBlockTokens is the block size of Mooncake traces' hash_ids.
const TraceBlockTokens = 512

// traceRecord is one line of a Mooncake-format trace.
type traceRecord struct {
	Timestamp    *float64 `json:"timestamp"` // milliseconds from the start
	InputLength  *int     `json:"input_length"`
	OutputLength *int     `json:"output_length"`
	HashIDs      []uint64 `json:"hash_ids"`
}

// LoadTrace reads a Mooncake-format trace file (see ParseTrace).
func LoadTrace(path string, n int) (*Workload, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("sim: trace: %w", err)
	}
	defer f.Close()
	w, err := ParseTrace(f, n)
	if err != nil {
		return nil, fmt.Errorf("sim: trace %s: %w", filepath.Base(path), err)
	}
	w.Name = "trace:" + filepath.Base(path)
	return w, nil
}

// ParseTrace reads JSONL records {"timestamp" (ms), "input_length",
// "output_length", "hash_ids"} and returns them as completion requests whose
// prompt is one segment per hash id: a block id names 512 deterministic
// tokens, so equal ids are equal tokens and equal text; the last block holds
// what is left of input_length. At most n records are read (n <= 0: all).
// Errors name the line.
func ParseTrace(r io.Reader, n int) (*Workload, error) {
	preset, err := vllmsim.LookupPreset("llama-3.1-70b-8xh100")
	if err != nil {
		return nil, err
	}
	w := &Workload{Name: "trace", Replicas: 7, Engine: preset.Engine,
		Note: "Mooncake-format trace replayed at its timestamps; 512-token blocks synthesized per hash id; llama-3.1-70b-8xh100 engines"}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), 64<<20)
	line := 0
	var last time.Duration
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if n > 0 && len(w.Requests) >= n {
			break
		}
		req, err := parseTraceLine(b)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if req.At < last {
			return nil, fmt.Errorf("line %d: timestamp %v ms goes back before %v ms", line, req.At.Milliseconds(), last.Milliseconds())
		}
		last = req.At
		w.Requests = append(w.Requests, req)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", line+1, err)
	}
	if len(w.Requests) == 0 {
		return nil, errors.New("no records")
	}
	return w, nil
}

func parseTraceLine(b []byte) (*Request, error) {
	var rec traceRecord
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&rec); err != nil {
		return nil, fmt.Errorf("not a JSON trace record: %v", err)
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value on the line")
	}
	switch {
	case rec.Timestamp == nil:
		return nil, errors.New(`missing "timestamp"`)
	case rec.InputLength == nil:
		return nil, errors.New(`missing "input_length"`)
	case rec.OutputLength == nil:
		return nil, errors.New(`missing "output_length"`)
	case len(rec.HashIDs) == 0:
		return nil, errors.New(`missing or empty "hash_ids"`)
	case *rec.Timestamp < 0:
		return nil, fmt.Errorf("negative timestamp %v", *rec.Timestamp)
	case *rec.InputLength < 1:
		return nil, fmt.Errorf("input_length %d must be positive", *rec.InputLength)
	case *rec.OutputLength < 0:
		return nil, fmt.Errorf("negative output_length %d", *rec.OutputLength)
	}
	in, k := *rec.InputLength, len(rec.HashIDs)
	if in > k*TraceBlockTokens || in <= (k-1)*TraceBlockTokens {
		return nil, fmt.Errorf("input_length %d does not fit %d hash_ids of %d tokens (want %d..%d)",
			in, k, TraceBlockTokens, (k-1)*TraceBlockTokens+1, k*TraceBlockTokens)
	}
	segs := make([]Segment, k)
	for i, id := range rec.HashIDs {
		segs[i] = Segment{ID: mix(id ^ 0x7261636562656c6c), Tokens: TraceBlockTokens}
	}
	segs[k-1].Tokens = in - (k-1)*TraceBlockTokens
	return &Request{
		At:     time.Duration(*rec.Timestamp * float64(time.Millisecond)),
		Prompt: segs,
		Output: max(*rec.OutputLength, 1),
	}, nil
}
