package server

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/prefixgate/prefixgate/internal/pipeline"
)

// A client that sends a whole body before it reads the answer (Python's
// http.client and urllib, many SDKs) would see "connection reset" instead of
// a 413 if the router closed the connection while the body was still
// arriving: the kernel answers unread data with a reset, which also drops
// the 413 from the client's receive window. So after a 413 on HTTP/1 the
// router keeps reading and discarding, as nginx's lingering close does, up
// to these bounds, and only then closes.
const (
	// lingerMaxBytes bounds what is discarded after a 413.
	lingerMaxBytes = 128 << 20
	// lingerTime bounds the whole lingering read; lingerIdle bounds one
	// wait for more bytes.
	lingerTime = 10 * time.Second
	lingerIdle = 2 * time.Second
)

// checkJSONContentType accepts a JSON body: no Content-Type at all,
// application/json or a +json type. Anything else (text/plain, a form) is
// 415: the body was not meant as the JSON request it would be read as.
func checkJSONContentType(r *http.Request) error {
	ct := headerValue(r.Header, "Content-Type")
	if ct == "" || ct == "application/json" {
		return nil // the common value, accepted without the parser's allocations
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json")) {
		return nil
	}
	return &pipeline.Error{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
		Message: fmt.Sprintf("Content-Type %.100q is not JSON; send application/json", ct)}
}

// writeBodyError writes err for a request whose body was refused. After a
// 413 on HTTP/1 it reads and discards what the client is still sending,
// within lingerMaxBytes and lingerTime, so that the client reads the 413
// rather than a reset; the connection is closed afterwards.
func writeBodyError(w http.ResponseWriter, r *http.Request, err error) {
	re := pipeline.AsError(err)
	// A client that asked "Expect: 100-continue" and was sent no 100 sends
	// no body: there is nothing to linger for.
	waiting := re.BodyUnread && strings.EqualFold(r.Header.Get("Expect"), "100-continue")
	if re.Status != http.StatusRequestEntityTooLarge || r.ProtoMajor != 1 || waiting {
		writeErrorFor(w, r, err)
		return
	}
	rc := http.NewResponseController(w)
	// Without full duplex the HTTP/1 server may refuse body reads once the
	// answer is written.
	if rc.EnableFullDuplex() != nil {
		writeErrorFor(w, r, err)
		return
	}
	w.Header().Set("Connection", "close")
	writeErrorFor(w, r, err)
	if rc.Flush() != nil {
		return
	}
	linger(rc, r.Body)
}

// linger discards body until it ends, lingerMaxBytes have been read,
// lingerTime has passed, or the client pauses for lingerIdle.
func linger(rc *http.ResponseController, body io.Reader) {
	bp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bp)
	buf := *bp
	end := time.Now().Add(lingerTime)
	for n := int64(0); n < lingerMaxBytes; {
		next := time.Now().Add(lingerIdle)
		if next.After(end) {
			next = end
		}
		if rc.SetReadDeadline(next) != nil {
			return
		}
		m, err := body.Read(buf)
		n += int64(m)
		if err != nil {
			return
		}
	}
}
