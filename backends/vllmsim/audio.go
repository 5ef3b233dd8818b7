package vllmsim

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"mime/multipart"
	"net/http"
	"strings"
)

const (
	// wordsPerSecond is the simulated speech rate of transcripts.
	wordsPerSecond = 2.5
	// maxTranscriptTokens caps a transcript, as Whisper's decoder length does.
	maxTranscriptTokens = 448
	// compressedBytesPerSecond gives the duration of audio that is not WAV:
	// 128 kbit/s.
	compressedBytesPerSecond = 16000
	// maxFormField bounds each non-file form field.
	maxFormField = 64 << 10
	// wavHeaderWindow is how much of an upload is searched for WAV headers.
	wavHeaderWindow = 4096
)

// audioInfo is what the simulated model learns from an upload.
type audioInfo struct {
	bytes   int64
	seconds float64
	wav     bool
}

// readAudio reads an upload to its end through a fixed buffer, never
// holding it whole, and returns its size and duration: a WAV file's from
// its header, other audio's at 128 kbit/s.
func readAudio(file io.Reader) (audioInfo, error) {
	head := make([]byte, wavHeaderWindow)
	n, err := io.ReadFull(file, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return audioInfo{}, err
	}
	head = head[:n]
	rest, err := io.CopyBuffer(io.Discard, file, make([]byte, 32<<10))
	if err != nil {
		return audioInfo{}, err
	}
	info := audioInfo{bytes: int64(n) + rest}
	if byteRate, dataOff, dataLen, ok := parseWAV(head); ok {
		avail := info.bytes - int64(dataOff)
		if dataLen == 0 || dataLen == math.MaxUint32 || int64(dataLen) > avail {
			dataLen = uint32(min(avail, math.MaxUint32))
		}
		info.wav = true
		info.seconds = float64(dataLen) / float64(byteRate)
		return info, nil
	}
	info.seconds = float64(info.bytes) / compressedBytesPerSecond
	return info, nil
}

// parseWAV finds a RIFF/WAVE header's byte rate and its data chunk's
// offset and length within head.
func parseWAV(head []byte) (byteRate uint32, dataOff int, dataLen uint32, ok bool) {
	if len(head) < 12 || !bytes.Equal(head[:4], []byte("RIFF")) || !bytes.Equal(head[8:12], []byte("WAVE")) {
		return 0, 0, 0, false
	}
	le := binary.LittleEndian
	for off := 12; off+8 <= len(head); {
		id, size := string(head[off:off+4]), le.Uint32(head[off+4:off+8])
		body := off + 8
		switch id {
		case "fmt ":
			if body+12 > len(head) {
				return 0, 0, 0, false
			}
			byteRate = le.Uint32(head[body+8 : body+12])
		case "data":
			return byteRate, body, size, byteRate > 0
		}
		off = body + int(size) + int(size&1)
	}
	return 0, 0, 0, false
}

// audioForm is a transcription request's form.
type audioForm struct {
	fields map[string]string
	audio  audioInfo
	file   bool
}

// readAudioForm reads a multipart form part by part, streaming the file.
func readAudioForm(req *http.Request) (audioForm, error) {
	mr, err := req.MultipartReader()
	if err != nil {
		return audioForm{}, fmt.Errorf("body must be multipart/form-data: %v", err)
	}
	f := audioForm{fields: make(map[string]string)}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return f, nil
		}
		if err != nil {
			return f, fmt.Errorf("cannot read form: %v", err)
		}
		if err := f.readPart(part); err != nil {
			return f, err
		}
	}
}

func (f *audioForm) readPart(part *multipart.Part) error {
	defer part.Close()
	name := part.FormName()
	if name == "file" {
		info, err := readAudio(part)
		if err != nil {
			return fmt.Errorf("file: cannot read upload: %v", err)
		}
		f.audio, f.file = info, true
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(part, maxFormField+1))
	if err != nil {
		return fmt.Errorf("%s: cannot read form field: %v", name, err)
	}
	if len(b) > maxFormField {
		return fmt.Errorf("%s: form field longer than %d bytes", name, maxFormField)
	}
	f.fields[name] = string(b)
	return nil
}

// handleAudio serves /v1/audio/transcriptions (task "transcribe") and
// /v1/audio/translations (task "translate").
func (r *Replica) handleAudio(task string) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		f, err := readAudioForm(req)
		if err == nil && !f.file {
			err = errors.New("file: field required")
		}
		format := f.fields["response_format"]
		switch format {
		case "", "json", "text", "verbose_json":
		default:
			if err == nil {
				err = fmt.Errorf("response_format: must be json, text or verbose_json, not %q", format)
			}
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		lang := f.fields["language"]
		if lang == "" || task == "translate" {
			lang = "en"
		}
		words := min(max(int(math.Ceil(f.audio.seconds*wordsPerSecond)), 1), maxTranscriptTokens)
		prompt := Tokenize("<|startoftranscript|><|" + lang + "|><|" + task + "|>" + f.fields["prompt"])
		run, ok := r.begin(w, req, genRequest{model: f.fields["model"], prompt: prompt, maxTokens: &words})
		if !ok {
			return
		}
		if _, ok := r.finish(w, req, run); !ok {
			return
		}
		writeTranscript(w, format, task, lang, f.audio.seconds, OutputText(0, words))
	}
}

func writeTranscript(w http.ResponseWriter, format, task, lang string, seconds float64, text string) {
	switch format {
	case "text":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, strings.TrimSpace(text)+"\n")
	case "verbose_json":
		writeJSON(w, http.StatusOK, map[string]any{
			"task": task, "language": lang, "duration": seconds, "text": text, "segments": []any{},
		})
	default:
		writeJSON(w, http.StatusOK, map[string]any{
			"text": text, "usage": map[string]any{"type": "duration", "seconds": int(math.Ceil(seconds))},
		})
	}
}
