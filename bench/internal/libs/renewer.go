package libs

import (
	"context"
	"errors"
	"sync"
	"time"
)

// renewer renews a held lock every interval until stopped: the loop a user of
// a library without a watchdog writes around each lock.
type renewer struct {
	stopc chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	err   error
}

func startRenewer(interval time.Duration, renew func(context.Context) error) *renewer {
	r := &renewer{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-r.stopc:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), interval)
				err := renew(ctx)
				cancel()
				if err != nil {
					r.mu.Lock()
					r.err = errors.Join(r.err, err)
					r.mu.Unlock()
				}
			}
		}
	}()
	return r
}

// stop ends the loop and returns the renewals' errors; nil-safe.
func (r *renewer) stop() error {
	if r == nil {
		return nil
	}
	close(r.stopc)
	<-r.done
	return r.err
}

func (r *renewer) failed() bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err != nil
}
