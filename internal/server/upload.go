package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"

	"github.com/prefixgate/prefixgate/backends"
	"github.com/prefixgate/prefixgate/internal/h1front"
	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/internal/routes"
	"github.com/prefixgate/prefixgate/route"
)

// An upload (multipart/form-data: audio transcriptions and translations)
// is streamed through, never held whole: the router reads the form's
// fields up to its "model" field — at most maxUploadHead bytes, and the
// model must come before the file, as the OpenAI SDKs send it — picks the
// least-loaded healthy backend serving that model, and sends the bytes it
// has read followed by the rest of the upload as they arrive. The whole
// upload is bounded by limits.max_upload_bytes.

// maxUploadHead bounds what is read of an upload to find its model.
const maxUploadHead = 1 << 20

// maxModelField bounds the model field's value.
const maxModelField = 256

// errUploadHead says the fields before the model passed maxUploadHead.
var errUploadHead = errors.New("upload head too large")

// handleUpload serves a multipart route.
func (s *Server) handleUpload(rt *routes.Route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !rt.Allows(r.Method) {
			s.fail(w, r, rt, nil, methodNotAllowed(w, r, rt.Methods))
			return
		}
		ctx, cancel := h1front.WithRequestTimeout(r.Context(), s.cfg.RequestTimeout)
		defer cancel()
		boundary, err := s.checkUpload(r)
		if err != nil {
			s.failBody(w, r, rt, err)
			return
		}
		body := http.MaxBytesReader(w, r.Body, s.cfg.MaxUploadBytes)
		model, head, err := s.uploadModel(body, boundary)
		if err != nil {
			s.failBody(w, r, rt, err)
			return
		}
		name, err := s.leastLoaded(model, rt.Path)
		var d route.Decision
		if err == nil {
			d, err = s.rt().PickMember(name, route.Request{Model: model}, false)
		}
		if err != nil {
			s.fail(w, r, rt, nil, s.pipe.PickError(err, model))
			return
		}
		fwd := forwardHeaders(r.Header)
		fwd["Content-Type"] = r.Header["Content-Type"]
		rest := &clientBody{r: io.MultiReader(bytes.NewReader(head), body)}
		resp, err := s.pool.ForwardStream(ctx, d.Member.(*backends.Backend), http.MethodPost, rt.Path, rest, r.ContentLength, fwd)
		if err != nil && rest.err != nil {
			// The client's upload failed, not the backend: an outcome
			// that says nothing of it (Backend.Observe), and the client's
			// error.
			d.DoneWith(route.Outcome{Err: rest.err, PromptTokens: -1, CachedTokens: -1})
			s.failBody(w, r, rt, s.uploadError(rest.err, "file"))
			return
		}
		s.relayPicked(w, r, rt, &d, resp, err)
	}
}

// checkUpload refuses an upload that is not multipart/form-data with a
// boundary (415), that is compressed (415: it would have to be decoded to
// find the model) or whose declared length is over the limit (413); it
// returns the boundary.
func (s *Server) checkUpload(r *http.Request) (string, error) {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return "", &pipeline.Error{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
			Message: fmt.Sprintf("Content-Type %.100q is not multipart/form-data with a boundary", r.Header.Get("Content-Type"))}
	}
	if e := strings.TrimSpace(r.Header.Get("Content-Encoding")); e != "" && !strings.EqualFold(e, "identity") {
		return "", &pipeline.Error{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
			Message: fmt.Sprintf("Content-Encoding %.40q: uploads are accepted uncompressed only", e)}
	}
	if r.ContentLength > s.cfg.MaxUploadBytes {
		return "", s.uploadTooLarge(r.ContentLength)
	}
	return params["boundary"], nil
}

// uploadTooLarge is the 413 of an upload of n bytes (-1: unknown).
func (s *Server) uploadTooLarge(n int64) error {
	size := "upload"
	if n >= 0 {
		size = fmt.Sprintf("upload of %d bytes", n)
	}
	return &pipeline.Error{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large", BodyUnread: n >= 0,
		Message: fmt.Sprintf("%s is larger than the limit of %d bytes (limits.max_upload_bytes, --max-upload-bytes)", size, s.cfg.MaxUploadBytes)}
}

// failBody counts and writes an error about r's body in rt's shape,
// draining what the client still sends after a 413 (writeBodyError).
func (s *Server) failBody(w http.ResponseWriter, r *http.Request, rt *routes.Route, err error) {
	s.record(rt.Label, nil, pipeline.Status(err))
	writeBodyError(w, r, err)
}

// clientBody reads the client's upload and keeps the error that ended it
// early, if any, so that a failed forward can be told from a failed
// upload.
type clientBody struct {
	r   io.Reader
	err error
}

func (cb *clientBody) Read(p []byte) (int, error) {
	n, err := cb.r.Read(p)
	if err != nil && err != io.EOF {
		cb.err = err
	}
	return n, err
}

// recordingReader keeps every byte read through it, up to max.
type recordingReader struct {
	r   io.Reader
	buf []byte
	max int
}

func (rr *recordingReader) Read(p []byte) (int, error) {
	if len(rr.buf) >= rr.max {
		return 0, errUploadHead
	}
	n, err := rr.r.Read(p[:min(len(p), rr.max-len(rr.buf))])
	rr.buf = append(rr.buf, p[:n]...)
	return n, err
}

// uploadModel reads the form's parts up to its model field and returns the
// model and every byte read from body so far, which the backend must get
// first.
func (s *Server) uploadModel(body io.Reader, boundary string) (model string, head []byte, err error) {
	rr := &recordingReader{r: body, max: maxUploadHead}
	mr := multipart.NewReader(rr, boundary)
	for {
		part, err := mr.NextRawPart()
		if err != nil {
			return "", nil, s.uploadError(err, "")
		}
		name := part.FormName()
		switch {
		case part.FileName() != "" || name == "file":
			return "", nil, uploadInvalid(fmt.Sprintf("the form's file part %q comes before its model field; send model first", name), "model")
		case name == "model":
			v, err := io.ReadAll(io.LimitReader(part, maxModelField+1))
			if err != nil {
				return "", nil, s.uploadError(err, name)
			}
			if len(v) == 0 || len(v) > maxModelField {
				return "", nil, uploadInvalid(fmt.Sprintf("the form's model field is empty or longer than %d bytes", maxModelField), "model")
			}
			return string(v), rr.buf, nil
		}
		if _, err := io.Copy(io.Discard, part); err != nil {
			return "", nil, s.uploadError(err, name)
		}
	}
}

// uploadError explains a failure to read an upload's fields, in part
// (the field being read, "" between parts).
func (s *Server) uploadError(err error, part string) error {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return s.uploadTooLarge(-1)
	case errors.Is(err, errUploadHead):
		return uploadInvalid(fmt.Sprintf("the form's fields before its model field pass %d bytes; send model first", maxUploadHead), "model")
	case errors.Is(err, io.EOF) && part == "":
		return uploadInvalid("the form has no model field", "model")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return uploadInvalid(fmt.Sprintf("the upload ended early, in field %.64q", part), "")
	case errors.Is(err, context.Canceled):
		return &pipeline.Error{Status: 499, Code: "canceled", Message: "client canceled the request"}
	}
	where := "between parts"
	if part != "" {
		where = fmt.Sprintf("in field %.64q", part)
	}
	return uploadInvalid(fmt.Sprintf("multipart body %s: %v", where, err), "")
}

func uploadInvalid(msg, param string) error {
	return &pipeline.Error{Status: http.StatusBadRequest, Code: "invalid_upload", Param: param, Message: msg}
}
