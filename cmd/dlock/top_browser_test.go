package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	dl "github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/cmd/dlock/backend"
	"github.com/dlockgo/dlock/cmd/dlock/drill"
	"github.com/dlockgo/dlock/internal/freeport"
	"github.com/dlockgo/dlock/internal/redistest"
)

// topHolderEnv makes the test binary a lock holder (see TestMain): it
// holds the FairLock named by the value's second field on the Redis URL of
// its first, with a 1 s watchdog lease, says "held" and waits to be killed.
const topHolderEnv = "DLOCK_TOP_HOLDER"

// topHolder is the holder process of topHolderEnv.
func topHolder(spec string) int {
	url, name, _ := strings.Cut(spec, "|")
	rdb, err := backend.NewRedisClient(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c, err := dl.New(rdb, dl.Config{Label: "holder", TTL: time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := c.FairLock(name).Acquire(context.Background(), dl.Wait(10*time.Second)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("held")
	select {} // until killed
}

// startHolder starts a holder process of name on url and returns it once
// it holds the lock.
func startHolder(t *testing.T, url, name string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), topHolderEnv+"="+url+"|"+name)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "held\n" {
		t.Fatalf("holder: %q, %v", line, err)
	}
	return cmd
}

// browser returns a chromedp context of a headless Chromium, closed at
// cleanup.
func browser(t *testing.T) context.Context {
	t.Helper()
	if _, err := exec.LookPath("chromium"); err != nil {
		t.Fatal("chromium is not installed: scripts/install.sh installs it")
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		append(chromedp.DefaultExecAllocatorOptions[:], chromedp.NoSandbox, chromedp.ExecPath("chromium"), chromedp.WindowSize(1280, 1000))...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	return ctx
}

// poll waits until the page's expression is truthy, at most within, and
// returns its value.
func poll[T any](t *testing.T, ctx context.Context, what, expr string, within time.Duration) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Poll[T](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(within)))
	if err != nil {
		now, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("view").innerText`))
		t.Fatalf("%s: not within %v (%v); the page shows:\n%s", what, within, err, now)
	}
	return v
}

// The page as the one on call sees it, in a real browser, against a real
// Redis: the holder (a process of its own), its waiters in order, the
// lease bar draining, the holder killed and its expiry shown within 2 s of
// the lease running out, the server gone ("unreachable since") and back.
func TestTopInBrowser(t *testing.T) {
	srv := redistest.Start(t)
	url := "redis://" + srv.Addr() + "/0"
	addr := startTop(t, "--redis", url, "--every", "200ms")
	ctx := browser(t)

	holder := startHolder(t, url, "stock:1")
	waiters := make([]*dl.Client, 2)
	acquired := make(chan *dl.Lease, 2)
	wctx, stopWaiting := context.WithCancel(context.Background())
	defer stopWaiting()
	for i := range waiters {
		c, err := dl.New(redistest.Client(t, srv), dl.Config{Label: fmt.Sprintf("waiter-%d", i+1)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		waiters[i] = c
		go func() {
			l, err := c.FairLock("stock:1").Acquire(wctx)
			if err == nil {
				acquired <- l
			}
		}()
		// the next waiter queues behind this one
		waitFor(t, "waiter queued", func() bool {
			info, err := c.Inspect(context.Background(), "stock:1")
			return err == nil && len(info.Queue) == i+1
		})
	}

	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+addr+"/")); err != nil {
		t.Fatal(err)
	}
	poll[bool](t, ctx, "the page goes live", `document.querySelector("#live.on") !== null`, 5*time.Second)
	row := `document.querySelector('tr.lock[data-name="stock:1"]')`
	who := poll[string](t, ctx, "the holder shown", row+` && `+row+`.querySelector("li.holder").textContent`, 5*time.Second)
	if pid := fmt.Sprintf(":%d", holder.Process.Pid); !strings.Contains(who, pid) || !strings.Contains(who, "holder") {
		t.Errorf("holder shown as %q, want its pid %s and label", who, pid)
	}
	order := poll[[]string](t, ctx, "both waiters shown",
		`(l => l.length == 2 && l)([...`+row+`.querySelectorAll("li.waiter i")].map(e => e.textContent))`, 5*time.Second)
	if order[0] != "waiter-1" || order[1] != "waiter-2" {
		t.Errorf("waiters shown in order %v, want waiter-1, waiter-2", order)
	}
	// The lease bar drains between readings (a CSS animation from the lease
	// left) and is set again by each: its width changes on screen.
	bar := row + `.querySelector("li.holder .ttl span")`
	w0 := poll[float64](t, ctx, "a lease bar", bar+` && `+bar+`.getBoundingClientRect().width + 0.001`, 5*time.Second)
	poll[bool](t, ctx, "the lease bar moves", fmt.Sprintf(`Math.abs(%s.getBoundingClientRect().width + 0.001 - %f) > 1`, bar, w0), 3*time.Second)

	// Kill the holder: its lease (1 s) runs out, the page shows it expired
	// within 2 s of the key's end (seen from here), and the first waiter
	// holding.
	before, err := waiters[0].Inspect(context.Background(), "stock:1")
	if err != nil || len(before.Holders) != 1 {
		t.Fatalf("stock:1 before the kill: %+v, %v", before, err)
	}
	gone := make(chan time.Time, 1) // when the killed holder's hold ends, seen from here
	go func() {
		defer close(gone)
		for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			info, err := waiters[0].Inspect(context.Background(), "stock:1")
			if err == nil && (len(info.Holders) == 0 || info.Holders[0].Fence != before.Holders[0].Fence) {
				gone <- time.Now()
				return
			}
		}
	}()
	if err := holder.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	poll[bool](t, ctx, "the expiry shown", `document.querySelector('li.event[data-name="stock:1"][data-kind="expired"]') !== null`, 10*time.Second)
	shown := time.Now()
	if at, ok := <-gone; !ok {
		t.Error("the killed holder still held the lock 15 s after the kill")
	} else if d := shown.Sub(at); d > 2*time.Second {
		t.Errorf("the expiry was shown %v after the hold ended: want within 2 s", d)
	}
	select {
	case l := <-acquired:
		defer l.Unlock(context.Background())
	case <-time.After(5 * time.Second):
		t.Fatal("the first waiter was not granted")
	}
	who = poll[string](t, ctx, "the new holder shown",
		`(h => h && h.textContent.includes("waiter-1") && h.textContent)(`+row+` && `+row+`.querySelector("li.holder"))`, 3*time.Second)
	if !strings.Contains(who, "waiter-1") {
		t.Errorf("new holder %q", who)
	}

	if os.Getenv("TOPDEBUG") != "" {
		resp, _ := http.Get("http://" + addr + "/")
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Logf("%s", regexp.MustCompile(`<rect class="bar"[^>]*>`).FindAllString(string(b), -1))
	}
	if *updateDocs { // the page in docs/OPERATIONS.md: a hold expired, its waiters granted in order
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("../../docs/img/top.png", png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The server goes away: "unreachable since", then back by itself.
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	poll[bool](t, ctx, "unreachable shown", `(s => s && s.dataset.reachable == "false" && s.textContent.includes("unreachable since"))(document.getElementById("status"))`, 5*time.Second)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	poll[bool](t, ctx, "reachable again", `(s => s && s.dataset.reachable == "true")(document.getElementById("status"))`, 10*time.Second)
}

// startTop runs `dlock top` in-process on a free loopback port with args
// and returns its address once it answers; it is stopped (as by SIGINT) at
// cleanup, which checks that it stopped cleanly.
func startTop(t *testing.T, args ...string) string {
	t.Helper()
	port, err := freeport.Take(false)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var out, errb lockedBuffer
	go func() { done <- run(ctx, append([]string{"top", "--listen", addr}, args...), &out, &errb) }()
	t.Cleanup(func() {
		stop()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("top exited %d: %s", code, errb.String())
			}
		case <-time.After(10 * time.Second):
			t.Error("top did not stop within 10 s of SIGINT")
		}
	})
	waitFor(t, "top serving", func() bool {
		resp, err := http.Get("http://" + addr + "/api/locks")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	})
	return addr
}

// The page during `dlock drill soak` on Redis (faults on a Sentinel-watched
// master among them): live through the faults, it shows the soak's locks
// and their grants drawn on the timeline; the soak's own checks still pass
// beside it (the view only reads). With -update-docs its screenshot is the
// one in docs/OPERATIONS.md.
func TestTopDuringSoak(t *testing.T) {
	started := make(chan string, 1)
	soaked := make(chan error, 1)
	go func() {
		res, err := drill.Soak(context.Background(), drill.SoakOptions{
			Backend: backend.Redis, Duration: 14 * time.Second, Every: 4 * time.Second, Down: 2 * time.Second,
			Started: func(addr string) { started <- addr },
		})
		if err == nil && !res.OK() {
			err = fmt.Errorf("the soak's checks failed: mutex %q, fenced %q, tokens %q, double grants %d", res.Mutex, res.Fenced, res.Tokens, res.DoubleGrants)
		}
		soaked <- err
	}()
	var addr string
	select {
	case redisURL := <-started:
		addr = startTop(t, "--redis", redisURL, "--every", "250ms")
	case err := <-soaked:
		t.Fatalf("the soak ended before it started: %v", err)
	}
	ctx := browser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+addr+"/")); err != nil {
		t.Fatal(err)
	}
	poll[bool](t, ctx, "the page goes live", `document.querySelector("#live.on") !== null`, 10*time.Second)
	lanes := poll[int](t, ctx, "the soak's locks on the timeline",
		`(n => n >= 3 && document.querySelectorAll("li.event").length >= 20 && n)(document.querySelectorAll("svg.timeline text.lane-label").length)`, 12*time.Second)
	if lanes < 3 {
		t.Errorf("%d locks on the timeline", lanes)
	}
	if *updateDocs {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("../../docs/img/top-soak.png", png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-soaked; err != nil {
		t.Fatal(err)
	}
}
