package h1front

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/backends/donehook"
)

// TestFrontContextActsAsAContext: Done and Err change once, on cancel; a
// function registered with AfterFunc runs once unless stopped first; one
// registered after the end runs too; a context derived with
// context.WithCancel ends with it; a second timeout goes to a derived
// context.
func TestFrontContextActsAsAContext(t *testing.T) {
	x := &requestContext{c: &clientConn{}, body: &requestBody{read: true}}
	if x.Err() != nil {
		t.Fatalf("Err before cancel: %v", x.Err())
	}
	if _, ok := x.Deadline(); ok {
		t.Fatal("a deadline before one was set")
	}
	done := x.Done()
	ran, stopped := make(chan string, 4), make(chan string, 4)
	stop := x.AfterFunc(func() { stopped <- "stopped one ran" })
	_ = x.AfterFunc(func() { ran <- "kept" })
	child, cancelChild := context.WithCancel(x)
	defer cancelChild()
	viaStd := context.AfterFunc(x, func() { ran <- "context.AfterFunc" })
	defer viaStd()
	if !stop() {
		t.Fatal("stop before the end: false; want true")
	}
	if stop() {
		t.Fatal("second stop: true; want false")
	}
	x.cancel(context.DeadlineExceeded)
	x.cancel(context.Canceled) // the first end stays
	select {
	case <-done:
	default:
		t.Fatal("Done not closed after cancel")
	}
	if !errors.Is(x.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err: %v; want the first end's", x.Err())
	}
	<-child.Done()
	if !errors.Is(child.Err(), context.DeadlineExceeded) {
		t.Fatalf("derived context's Err: %v", child.Err())
	}
	got := map[string]bool{<-ran: true, <-ran: true}
	if !got["kept"] || !got["context.AfterFunc"] {
		t.Fatalf("functions run: %v", got)
	}
	late := x.AfterFunc(func() { ran <- "late" })
	if <-ran != "late" || late() {
		t.Fatal("a function registered after the end must run, and stop must say so")
	}
	select {
	case s := <-stopped:
		t.Fatal(s)
	default:
	}
	y := &requestContext{c: &clientConn{}, body: &requestBody{read: true}}
	ctx, cancel := WithRequestTimeout(y, time.Hour)
	defer cancel()
	if ctx != context.Context(y) {
		t.Fatal("the first timeout did not go to the front context itself")
	}
	ctx2, cancel2 := WithRequestTimeout(ctx, time.Minute)
	defer cancel2()
	if ctx2 == ctx {
		t.Fatal("a second timeout went to the front context")
	}
	if dl, _ := ctx2.Deadline(); time.Until(dl) > time.Minute {
		t.Fatalf("the derived deadline is %v away; want at most a minute", time.Until(dl))
	}
	y.c.stopDeadline() // the timer the hour's deadline armed
}

// TestFrontContextDoneHooks: the numbered registrations the backend
// transport uses (AddDoneHook, RemoveDoneHook) behave as AfterFunc and
// its stop: removed before the end, a hook never runs; kept, it runs once
// at the end; added after the end, it runs at once and cannot be removed.
func TestFrontContextDoneHooks(t *testing.T) {
	var _ interface {
		AddDoneHook(func()) uint64
		RemoveDoneHook(uint64) bool
	} = (*requestContext)(nil) // what backends' doneHooker asks of a context
	x := &requestContext{c: &clientConn{}, body: &requestBody{read: true}}
	ran := make(chan string, 4)
	removed := x.AddDoneHook(func() { ran <- "removed" })
	kept := x.AddDoneHook(func() { ran <- "kept" })
	if removed == 0 || kept == 0 || removed == kept {
		t.Fatalf("ids %d and %d: want two distinct non-zero ones", removed, kept)
	}
	if !x.RemoveDoneHook(removed) || x.RemoveDoneHook(removed) {
		t.Fatal("removing a hook: want true once, then false")
	}
	x.cancelRequest()
	if got := <-ran; got != "kept" {
		t.Fatalf("ran %q, want kept", got)
	}
	if x.RemoveDoneHook(kept) {
		t.Fatal("removing a hook that ran: true")
	}
	if id := x.AddDoneHook(func() { ran <- "late" }); id != 0 || x.RemoveDoneHook(id) {
		t.Fatalf("a hook added after the end: id %d, want 0 and no removal", id)
	}
	if got := <-ran; got != "late" {
		t.Fatalf("ran %q, want late", got)
	}
	select {
	case got := <-ran:
		t.Fatalf("%q ran too", got)
	default:
	}
}

// TestRequestContextIsADoneHookContext: what a handler gets as its
// request's context is the front door's own, which the backend client
// finds by the donehook contract.
func TestRequestContextIsADoneHookContext(t *testing.T) {
	got := make(chan bool, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- donehook.Hooked(r.Context())
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := New(ln, Config{Handler: h, HeaderTimeout: 10 * time.Second, MaxBodyBytes: 1 << 20})
	go func() { _ = f.Run() }()
	defer f.Close()
	resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !<-got {
		t.Fatal("a front door request's context is not a donehook.Context")
	}
}
