package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	dl "github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/cmd/dlock/backend"
	"github.com/dlockgo/dlock/cmd/dlock/top"
	"github.com/dlockgo/dlock/seam"
)

// topConfig are top's flags beside the operator commands' own.
type topConfig struct {
	listen      string
	pattern     string
	every, keep time.Duration
	allowUnlock bool
}

func newTopCmd() *cobra.Command {
	var f adminFlags
	var cfg topConfig
	c := &cobra.Command{
		Use:   "top [--listen ADDR] [--pattern GLOB] [--backend redis|etcd|zookeeper]",
		Short: "A live view of the locks in the browser: who holds what, who waits, what was lost",
		Long: "top serves a page (on loopback by default) that shows, live, every held lock whose name matches\n" +
			"--pattern: its shape, holders (host, pid, label, fencing token, held for, the lease left as a\n" +
			"bar that drains), its waiters in order with how long each has waited, the hottest names of the\n" +
			"last minute, a timeline of the grants, releases and expiries it saw, and the dlock unlock --force\n" +
			"line of each lock (Redis). It reads the lock service every --every (Redis: SCAN, never KEYS;\n" +
			"etcd: keys-only range reads; ZooKeeper: directory listings) and never writes to it, unless\n" +
			"started with --allow-unlock: then the page can force-unlock a lock once its name is typed.\n\n" +
			"A service that goes away shows \"unreachable since ...\" and the page recovers by itself when\n" +
			"it returns. The page is plain HTML served from the binary: without JavaScript it is a snapshot.\n" +
			"  GET /             the page (?name=GLOB&holder=TEXT filter it)\n" +
			"  GET /api/locks    the same data as JSON\n" +
			"  GET /events       server-sent events: the view after each reading\n" +
			"  POST /api/unlock  name=NAME&confirm=NAME, header X-Dlock-Unlock: 1 (only with --allow-unlock)\n\n" +
			"--json prints one reading as JSON and exits, for scripts.\n\n" +
			"Exit codes: 0 stopped by SIGINT or SIGTERM, or --json printed; 1 a runtime failure (the server\n" +
			"unreachable at the start); 2 bad input (unknown flag, bad address, --listen taken or invalid).",
		Example: "  dlock top\n" +
			"  dlock top --pattern 'stock:*' --every 500ms --listen 127.0.0.1:7070\n" +
			"  dlock top --backend etcd --etcd 10.0.0.7:2379\n" +
			"  dlock top --pattern 'order:*' --json | jq '.locks[0]'",
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("top: no arguments (got %q): give names with --pattern", strings.Join(args, " "))
			}
			return runTop(c, &f, cfg)
		},
	}
	f.register(c, false)
	c.Flags().StringVar(&cfg.listen, "listen", "127.0.0.1:7070", "address to serve the page on (port 0: any free port)")
	c.Flags().StringVar(&cfg.pattern, "pattern", "*", "the lock names to show (a glob: 'stock:*')")
	c.Flags().DurationVar(&cfg.every, "every", time.Second, "how often to read the lock service (the page updates as often)")
	c.Flags().DurationVar(&cfg.keep, "history", 5*time.Minute, "how much history the timeline keeps")
	c.Flags().BoolVar(&cfg.allowUnlock, "allow-unlock", false, "let the page force-unlock a lock (Redis; the name must be typed to confirm)")
	return c
}

func runTop(c *cobra.Command, f *adminFlags, cfg topConfig) error {
	switch {
	case cfg.every < 10*time.Millisecond:
		return usagef("--every %v: want at least 10ms", cfg.every)
	case cfg.keep < cfg.every:
		return usagef("--history %v: want at least --every (%v)", cfg.keep, cfg.every)
	}
	if _, err := seam.CheckPattern(cfg.pattern); err != nil {
		return usagef("--pattern: %v", err)
	}
	kind, err := f.kind(c)
	if err != nil {
		return err
	}
	if cfg.allowUnlock && kind != backend.Redis {
		return usagef("--allow-unlock is Redis-only: on %s a lock lives as long as its holder's session", kind)
	}
	insp, done, err := f.openInspector(c, kind)
	if err != nil {
		return err
	}
	defer done()
	// A Lister reads again only what changed: on Redis the locks whose
	// grant changed, on etcd and ZooKeeper what their watches reported.
	var src top.Source = insp
	switch c := insp.(type) {
	case *dl.Client:
		src = c.NewLister()
	case backend.Client:
		l := c.NewLister()
		defer l.Close()
		src = l
	}
	w := top.NewWatcher(src, top.Options{Pattern: cfg.pattern, Every: cfg.every, Keep: cfg.keep})
	ctx := c.Context()
	if f.json {
		w.Read(ctx)
		v := w.View(top.Filter{}, nil)
		v.Backend, v.Server = kind, topServer(f, kind)
		if !v.Reachable {
			return fmt.Errorf("top: %s", v.Error)
		}
		enc := json.NewEncoder(c.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	p := &top.Page{Watcher: w, Backend: kind, Server: topServer(f, kind)}
	if locks, ok := insp.(*dl.Client); ok {
		p.UnlockCommand = f.unlockCommand
		if cfg.allowUnlock {
			p.Unlock = func(ctx context.Context, name string) (string, error) {
				r, err := locks.ForceUnlock(ctx, name)
				if err != nil {
					return "", err
				}
				if len(r.Keys) == 0 {
					return name + ": nothing was held", nil
				}
				return fmt.Sprintf("%s: removed %s", name, strings.Join(r.Keys, ", ")), nil
			}
		}
	}
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return usagef("--listen %s: the address is in use", cfg.listen)
		}
		return usagef("--listen %s: %v", cfg.listen, err)
	}
	// The page's event streams end with the server: Shutdown waits for
	// idle connections, and a stream is never idle.
	streams, endStreams := context.WithCancel(context.WithoutCancel(ctx))
	defer endStreams()
	srv := &http.Server{
		Handler:           p.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return streams },
	}
	wctx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); w.Run(wctx) }()
	fmt.Fprintf(c.OutOrStdout(), "dlock top: %s %s, names %q, read every %v, serving http://%s\n",
		kind, p.Server, cfg.pattern, cfg.every, ln.Addr())
	serveErr := serveUntilDone(ctx, srv, ln)
	endStreams()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	shutErr := srv.Shutdown(sctx)
	stopWatch()
	<-watched
	fmt.Fprintln(c.OutOrStdout(), "dlock top: stopped")
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return shutErr
}

// topServer names the server top reads, its password hidden.
func topServer(f *adminFlags, kind string) string {
	_, addr, _ := f.addr(kind)
	return backend.Redact(addr)
}

// unlockCommand returns the dlock unlock --force line for the lock called
// name on the Redis f names (its password hidden).
func (f *adminFlags) unlockCommand(name string) string {
	s := "dlock unlock --force " + shellQuote(name) + " --redis " + shellQuote(backend.Redact(f.redis))
	if f.cluster {
		s += " --cluster"
	}
	if f.prefix != "" && f.prefix != dl.DefaultPrefix {
		s += " --prefix " + shellQuote(f.prefix)
	}
	return s
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:/@=,+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
