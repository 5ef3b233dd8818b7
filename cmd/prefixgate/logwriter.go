package main

import (
	"bufio"
	"io"
	"sync"
	"time"
)

// logWriter buffers the serve log: one request log line per request was
// one write syscall per request on the hot path (docs/benchmarks.md,
// "Overhead against HAProxy"). Lines reach w within flushEvery, or sooner when the
// buffer fills, and all of them on Close.
type logWriter struct {
	mu   sync.Mutex
	buf  *bufio.Writer
	stop chan struct{}
	done chan struct{}
}

const logFlushEvery = 100 * time.Millisecond

func newLogWriter(w io.Writer) *logWriter {
	l := &logWriter{buf: bufio.NewWriterSize(w, 32<<10), stop: make(chan struct{}), done: make(chan struct{})}
	go l.flushLoop()
	return l
}

// Write takes one whole log line (slog handlers write each record in one
// call), so lines never interleave.
func (l *logWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logWriter) flushLoop() {
	defer close(l.done)
	t := time.NewTicker(logFlushEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			l.flush()
		case <-l.stop:
			l.flush()
			return
		}
	}
}

func (l *logWriter) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = l.buf.Flush()
}

// Close flushes what is buffered and stops the flusher.
func (l *logWriter) Close() error {
	close(l.stop)
	<-l.done
	return nil
}
