package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/dlockgo/dlock/internal/witness"
	"github.com/redis/go-redis/v9"
)

// pipelineSizes records the size of every pipeline of script calls a
// go-redis client sends.
type pipelineSizes struct {
	mu    sync.Mutex
	sizes []int
}

func (p *pipelineSizes) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (p *pipelineSizes) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (p *pipelineSizes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		p.mu.Lock()
		p.sizes = append(p.sizes, len(cmds))
		p.mu.Unlock()
		return next(ctx, cmds)
	}
}

func (p *pipelineSizes) largest() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, s := range p.sizes {
		n = max(n, s)
	}
	return n
}

// together runs f(0) … f(n-1) on n goroutines released at once, and
// waits for them.
func together(n int, f func(i int)) {
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			f(i)
		}()
	}
	close(gate)
	wg.Wait()
}

// The calls of concurrent callers of one Client go out together: while
// the server is paused, 64 acquisitions queue, and once it answers they
// share pipelines. Each caller gets its own grant, and one caller's
// WRONGTYPE fails that caller alone.
func TestBatchSharesPipelines(t *testing.T) {
	srv := redistest.Start(t)
	admin := redistest.Client(t, srv)
	sizes := &pipelineSizes{}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	rdb.AddHook(sizes)
	t.Cleanup(func() { rdb.Close() })
	c := newClient(t, rdb)
	ctx := context.Background()
	if err := admin.Set(ctx, "dlock:{wrong}", "not a lock", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.HSet(ctx, "dlock:{wrong-hash}", "a", "b").Err(); err != nil {
		t.Fatal(err)
	}
	// A call in flight while the others arrive: they queue behind it.
	slept := make(chan struct{})
	go func() {
		defer close(slept)
		_ = admin.Do(ctx, "DEBUG", "SLEEP", "0.3").Err()
	}()
	time.Sleep(50 * time.Millisecond)
	var w witness.Witness
	errs := make([]error, 64)
	tokens := make([]int64, 64)
	together(64, func(i int) {
		var lk dlock.Locker
		switch i {
		case 7:
			lk = c.Mutex("wrong-hash")
		case 13:
			lk = c.Lock("wrong")
		default:
			lk = c.Mutex(fmt.Sprint("batch-", i%32)) // two callers per name
		}
		l, err := lk.Acquire(ctx, dlock.Wait(5*time.Second))
		if err != nil {
			errs[i] = err
			return
		}
		tokens[i] = l.Token()
		key := lk.(interface{ Name() string }).Name()
		w.Enter(key)
		time.Sleep(time.Millisecond)
		w.Exit(key)
		errs[i] = l.Unlock(ctx)
	})
	<-slept
	for i, err := range errs {
		switch i {
		case 7, 13:
			if !errors.Is(err, dlock.ErrWrongType) {
				t.Errorf("caller %d on a key of the wrong type: %v, want ErrWrongType", i, err)
			}
		default:
			if err != nil || tokens[i] <= 0 {
				t.Errorf("caller %d: token %d, %v", i, tokens[i], err)
			}
		}
	}
	if n := w.Overlaps(); n != 0 {
		t.Errorf("%d overlaps", n)
	}
	if n := sizes.largest(); n < 8 {
		t.Errorf("largest pipeline %d calls: the queued callers did not share pipelines", n)
	}
}

// An Acquire returns by its own ctx deadline whatever its batch does: with
// the server paused (SIGSTOP), callers with deadlines from 100 ms to 1 s
// each return within a little of theirs, and once the server is back no
// grant is left behind (a grant that arrived after its caller gave up was
// given back).
func TestBatchDeadlines(t *testing.T) {
	srv := redistest.Start(t)
	admin := redistest.Client(t, srv)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: 10 * time.Second})
	t.Cleanup(func() { rdb.Close() })
	c := newClient(t, rdb)
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = srv.Resume()
		}
	}()
	const callers = 20
	late := make([]time.Duration, callers)
	together(callers, func(i int) {
		deadline := 100*time.Millisecond + time.Duration(i)*45*time.Millisecond
		actx, cancel := context.WithTimeout(ctx, deadline)
		defer cancel()
		start := time.Now()
		l, err := c.Mutex(fmt.Sprint("paused-", i)).Acquire(actx)
		if err == nil {
			_ = l.Unlock(ctx)
			t.Errorf("caller %d acquired on a paused server", i)
			return
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("caller %d: %v, want its ctx's deadline", i, err)
		}
		late[i] = time.Since(start) - deadline
	})
	for i, d := range late {
		if d > 250*time.Millisecond {
			t.Errorf("caller %d returned %v after its deadline", i, d)
		}
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	eventually(t, 10*time.Second, "the grants that arrived late are given back", func() bool {
		keys, _ := admin.Keys(ctx, "dlock:{paused-*").Result()
		return len(keys) == 0
	})
}

// A batch cut in the middle: while 32 goroutines of one Client take and
// release 8 locks, every connection of the Client is killed over and over
// (CLIENT KILL TYPE normal: replies lost with their pipelines, which
// go-redis resends). No two holders are ever inside one lock, tokens grow
// per name, and once the calls settle no lock key is left.
func TestBatchCutMidPipeline(t *testing.T) {
	srv := redistest.Start(t)
	admin := redistest.Client(t, srv)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: 5, MinRetryBackoff: time.Millisecond, MaxRetryBackoff: 20 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	c := newClient(t, rdb, dlock.Config{TTL: 2 * time.Second})
	ctx := context.Background()
	if err := admin.Do(ctx, "CLIENT", "SETNAME", "admin").Err(); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var kills atomic.Int64
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		for {
			select {
			case <-stop:
				return
			case <-time.After(3 * time.Millisecond):
			}
			// every normal connection but the admin's own
			list, err := admin.ClientList(ctx).Result()
			if err != nil {
				continue
			}
			for _, line := range strings.Split(list, "\n") {
				if strings.Contains(line, "name=admin") || !strings.Contains(line, "cmd=") {
					continue
				}
				for _, f := range strings.Fields(line) {
					if id, ok := strings.CutPrefix(f, "id="); ok {
						if admin.Do(ctx, "CLIENT", "KILL", "ID", id).Err() == nil {
							kills.Add(1)
						}
					}
				}
			}
		}
	}()
	var w witness.Witness
	var mu sync.Mutex
	last := map[string]int64{}
	var granted, failed atomic.Int64
	deadline := time.Now().Add(3 * time.Second)
	together(32, func(i int) {
		for j := 0; time.Now().Before(deadline); j++ {
			name := fmt.Sprint("cut-", (i+j)%8)
			actx, cancel := context.WithTimeout(ctx, time.Second)
			l, err := c.Mutex(name).Acquire(actx)
			cancel()
			if err != nil {
				failed.Add(1)
				continue
			}
			granted.Add(1)
			mu.Lock()
			if l.Token() <= last[name] {
				t.Errorf("%s: token %d after %d", name, l.Token(), last[name])
			}
			last[name] = l.Token()
			mu.Unlock()
			w.Enter(name)
			time.Sleep(200 * time.Microsecond)
			w.Exit(name)
			_ = l.Unlock(ctx) // a release whose reply is lost may report an error: the lock then expires or was released
		}
	})
	close(stop)
	<-killed
	t.Logf("%d grants, %d failed attempts, %d connections killed", granted.Load(), failed.Load(), kills.Load())
	if n := w.Overlaps(); n != 0 {
		t.Errorf("%d overlaps while connections were killed", n)
	}
	if granted.Load() < 100 || kills.Load() < 10 {
		t.Errorf("%d grants and %d kills: the test did not exercise cut batches", granted.Load(), kills.Load())
	}
	// Releases whose reply was lost were resent or expire with their lease
	// (2 s); Close releases what is still held.
	_ = c.Close()
	eventually(t, 10*time.Second, "no lock key left", func() bool {
		keys, _ := admin.Keys(ctx, "dlock:{cut-*").Result()
		return len(keys) == 0
	})
}
