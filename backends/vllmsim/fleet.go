package vllmsim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
)

// Fleet is K independent replicas, each with its own engine, cache and
// listener.
type Fleet struct {
	replicas []*Replica
	once     sync.Once
	done     chan struct{}
	err      error
}

// StartFleet starts k replicas named cfg.Name-0 … cfg.Name-(k-1) listening on
// consecutive ports from listenHostPort's port, or on an ephemeral port each
// if it is 0. The fleet closes when ctx ends or Close is called.
func StartFleet(ctx context.Context, listenHostPort string, k int, cfg Config) (*Fleet, error) {
	if k < 1 {
		return nil, errors.New("vllmsim: a fleet needs at least one replica")
	}
	host, portStr, err := net.SplitHostPort(listenHostPort)
	if err != nil {
		return nil, fmt.Errorf("vllmsim: listen address: %w", err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port+k-1 > 65535 {
		return nil, fmt.Errorf("vllmsim: bad listen port %q", portStr)
	}
	rcfg, err := cfg.resolved()
	if err != nil {
		return nil, err
	}
	f := &Fleet{done: make(chan struct{})}
	for i := range k {
		rc := rcfg
		rc.Seed = rcfg.Seed + uint64(i)
		r, err := NewReplica(fmt.Sprintf("%s-%d", rcfg.Name, i), rc)
		if err != nil {
			f.Close()
			return nil, err
		}
		p := 0
		if port != 0 {
			p = port + i
		}
		if err := r.Start(net.JoinHostPort(host, strconv.Itoa(p))); err != nil {
			r.Close()
			f.Close()
			return nil, err
		}
		f.replicas = append(f.replicas, r)
	}
	go func() {
		select {
		case <-ctx.Done():
			f.Close()
		case <-f.done:
		}
	}()
	return f, nil
}

// URLs returns the replicas' base URLs ("http://host:port"), in order.
func (f *Fleet) URLs() []string {
	urls := make([]string, len(f.replicas))
	for i, r := range f.replicas {
		urls[i] = r.URL()
	}
	return urls
}

// Replicas returns the replicas, in order.
func (f *Fleet) Replicas() []*Replica { return f.replicas }

// Shutdown stops the replicas' listeners gracefully, letting in-flight
// requests finish until ctx ends, then closes the fleet.
func (f *Fleet) Shutdown(ctx context.Context) error {
	var errs []error
	for _, r := range f.replicas {
		if err := r.Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(append(errs, f.Close())...)
}

// Close stops every replica at once.
func (f *Fleet) Close() error {
	f.once.Do(func() {
		var errs []error
		for _, r := range f.replicas {
			if err := r.Close(); err != nil {
				errs = append(errs, err)
			}
		}
		f.err = errors.Join(errs...)
		close(f.done)
	})
	return f.err
}
