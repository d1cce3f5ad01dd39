package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	dl "github.com/dlockgo/dlock" // dl: "dlock" is taken by the tests' helper
	"github.com/dlockgo/dlock/cmd/dlock/backend"
	"github.com/dlockgo/dlock/cmd/dlock/table"
	"github.com/dlockgo/dlock/election"
)

// defaultAdminRedis is the Redis inspect and unlock talk to without
// --redis: the local default, as redis-cli assumes (the other services'
// are their backend.Service's Local).
const defaultAdminRedis = "redis://127.0.0.1:6379/0"

// adminExitCodes is the exit-code paragraph of inspect's help,
// unlockExitCodes unlock's.
const (
	adminExitCodes = "Exit codes: 0 done; 1 a runtime failure (the server unreachable or failing); 2 bad input\n" +
		"(unknown flag, bad --redis URL, --etcd or --zk address or --prefix, invalid lock name or pattern,\n" +
		"wrong arguments, a flag of another backend)."
	unlockExitCodes = "Exit codes: 0 done; 1 a runtime failure (the server unreachable or failing, unlock not\n" +
		"confirmed); 2 bad input (unknown flag, bad --redis URL or --prefix, invalid lock name, wrong\n" +
		"arguments, --backend other than redis)."
)

// adminFlags are the flags of the operator commands (inspect, unlock).
type adminFlags struct {
	serviceFlags // --backend picks the lock service; --redis, --etcd, --zk
	cluster      bool
	prefix       string
	json         bool
}

// register registers the flags of an operator command; redisOnly leaves
// out the etcd and ZooKeeper ones (--backend stays, to say so).
func (f *adminFlags) register(c *cobra.Command, redisOnly bool) {
	c.Flags().StringVar(&f.redis, "redis", defaultAdminRedis, "Redis URL (redis:// or rediss://host:port/db; with ?master_name=NAME, a Sentinel)")
	c.Flags().BoolVar(&f.cluster, "cluster", false, "the URL names a Redis Cluster node (more seeds: ?addr=host:port&addr=...)")
	c.Flags().BoolVar(&f.json, "json", false, "print JSON: snake_case keys, durations in ms (ttl_ms; -1: no TTL), times in RFC 3339, [] when empty")
	if redisOnly {
		c.Flags().StringVar(&f.prefix, "prefix", dl.DefaultPrefix, "key prefix of the locks (dlock.Config.Prefix)")
		c.Flags().StringVar(&f.backend, "backend", backend.Redis, "lock service: only redis")
		return
	}
	// --prefix's default depends on the backend: the flag's own is "" (the
	// backend's default), each backend's is in its help.
	c.Flags().StringVar(&f.prefix, "prefix", "", prefixHelp())
	f.registerBackend(c)
	f.registerAddrs(c, true)
}

// prefixHelp is the help of inspect's --prefix: where the locks live, and
// its default on each backend.
func prefixHelp() string {
	defs := make([]string, len(backend.Services))
	for i, s := range backend.Services {
		defs[i] = fmt.Sprintf("%s %q", s.Kind, s.Prefix)
	}
	return "where the locks live: the key prefix on redis and etcd, the root znode on zookeeper " +
		"(Config.Prefix; default: " + strings.Join(defs, ", ") + ")"
}

// kind returns the backend --backend names, checking that no flag of
// another backend was given: bad input (exit 2) otherwise.
func (f *adminFlags) kind(c *cobra.Command) (string, error) {
	named, err := backend.Lookup(f.backend)
	if err != nil || f.backend == "" {
		return "", usagef("--backend %q: want one of %s", f.backend, strings.Join(backend.Kinds, ", "))
	}
	kind := named.Kind
	for _, s := range backend.Services {
		flags := []string{s.Flag}
		if s.Kind == backend.Redis {
			flags = append(flags, "cluster")
		}
		for _, flag := range flags {
			if c.Flags().Lookup(flag) != nil && c.Flags().Changed(flag) && s.Kind != kind {
				return "", usagef("--%s is a flag of --backend %s (this is --backend %s)", flag, s.Kind, kind)
			}
		}
	}
	return kind, nil
}

// inspector is what inspect reads a lock service through: the client of
// any backend (*dl.Client, backend.Client).
type inspector interface {
	election.Inspector
	List(ctx context.Context, pattern string) ([]dl.Info, error)
}

// openInspector connects to the lock service --backend names, as open
// does for Redis: it says which server on stderr ("etcd: 127.0.0.1:2379
// (the default)"), a bad address or prefix is a usage error (exit 2), an
// unreachable server a runtime failure (exit 1). The caller calls done when
// it is done with the client.
func (f *adminFlags) openInspector(c *cobra.Command, kind string) (insp inspector, done func(), err error) {
	if kind == backend.Redis {
		locks, done, err := f.open(c)
		if err != nil {
			return nil, nil, err
		}
		return locks, done, nil
	}
	flag, addr, _ := f.addr(kind)
	b, err := backend.Open(c.Context(), kind, addr)
	if err != nil {
		return nil, nil, openError(flag, err)
	}
	var o backend.ClientOptions
	if c.Flags().Changed("prefix") {
		o.Prefix = f.prefix
	}
	client, err := b.NewClient(c.Context(), o)
	if err != nil {
		_ = b.Close()
		if errors.Is(err, dl.ErrInvalidArgument) {
			return nil, nil, usagef("--prefix %q: %v", f.prefix, err)
		}
		return nil, nil, err
	}
	fmt.Fprintf(c.ErrOrStderr(), "%s: %s (%s)\n", kind, b.Addr, flagSource(c, flag))
	return client, func() { _ = client.Close(); _ = b.Close() }, nil
}

// open connects to the server and says which one on stderr ("redis:
// redis://127.0.0.1:6379/0 (the default)"), leaving stdout to the answer:
// a bad URL or prefix is a usage error (exit 2), an unreachable server a
// runtime failure (exit 1). The caller calls done when it is done with
// the client.
func (f *adminFlags) open(c *cobra.Command) (locks *dl.Client, done func(), err error) {
	var rdb redis.UniversalClient
	if f.cluster {
		o, err := backend.ParseRedisClusterURL(f.redis)
		if err != nil {
			return nil, nil, openError("redis", err)
		}
		rdb = redis.NewClusterClient(o)
	} else {
		c, err := backend.NewRedisClient(f.redis)
		if err != nil {
			return nil, nil, openError("redis", err)
		}
		rdb = c
	}
	if err := backend.PingRedis(c.Context(), rdb, f.redis); err != nil {
		_ = rdb.Close()
		return nil, nil, err
	}
	locks, err = dl.New(rdb, dl.Config{Prefix: f.prefix})
	if err != nil {
		_ = rdb.Close()
		return nil, nil, usagef("--prefix %q: %v", f.prefix, err)
	}
	fmt.Fprintln(c.ErrOrStderr(), serverLine(f.redis, flagSource(c, "redis")))
	return locks, func() { _ = locks.Close(); _ = rdb.Close() }, nil
}

// serverLine names the Redis a command uses (its password hidden) and
// where its URL came from: "redis: redis://127.0.0.1:6379/0 (the default)".
func serverLine(url, from string) string {
	return fmt.Sprintf("redis: %s (%s)", backend.Redact(url), from)
}

func newInspectCmd() *cobra.Command {
	var f adminFlags
	var pattern string
	var limit int
	c := &cobra.Command{
		Use:   "inspect [NAME | --pattern GLOB] [--backend redis|etcd|zookeeper]",
		Short: "Show who holds a lock, or list held locks oldest first",
		Long: "inspect NAME shows one lock of any shape: its holders (id, host, pid, label, since, hold count,\n" +
			"fencing token), the remaining TTL, the last fencing token granted, and whatever else the lock\n" +
			"keeps (queues, readers, permits).\n\n" +
			"inspect --pattern GLOB lists the held locks whose names match (a Redis glob: * ? [abc], \\ to\n" +
			"escape), oldest first, so a stuck holder stands out. On Redis it uses SCAN, never KEYS (on a\n" +
			"cluster: every master); on etcd one keys-only read of the lock directories; on ZooKeeper the\n" +
			"children of the lock directories. Each lock found is read as inspect NAME reads it.\n\n" +
			"--backend etcd or zookeeper reads the locks of etcdlock or zklock the same way, NAME or\n" +
			"--pattern, with the same text and JSON. It names the server it reads on stderr.\n\n" + adminExitCodes,
		Example: "  dlock inspect stock:1001 --redis redis://10.0.0.5:6379/0\n" +
			"  dlock inspect --pattern 'stock:*' --limit 20\n" +
			"  dlock inspect --pattern '*' --json | jq '.[0]'\n" +
			"  dlock inspect leader:scheduler --backend etcd --etcd 10.0.0.7:2379\n" +
			"  dlock inspect stock:1001 --backend zookeeper --zk 10.0.0.8:2181 --json\n" +
			"  dlock inspect --pattern 'order:*' --backend zookeeper --zk 10.0.0.8:2181",
		RunE: func(c *cobra.Command, args []string) error {
			switch {
			case len(args) > 1:
				return usagef("inspect: one lock name at a time (got %d)", len(args))
			case len(args) == 1 && pattern != "":
				return usagef("inspect: give a NAME or --pattern, not both")
			case len(args) == 0 && pattern == "":
				return usagef("inspect: give a lock NAME or --pattern GLOB")
			}
			kind, err := f.kind(c)
			if err != nil {
				return err
			}
			if pattern == "" && c.Flags().Changed("limit") {
				return usagef("inspect: --limit goes with --pattern")
			}
			insp, done, err := f.openInspector(c, kind)
			if err != nil {
				return err
			}
			defer done()
			out := c.OutOrStdout()
			if pattern != "" {
				infos, err := insp.List(c.Context(), pattern)
				if errors.Is(err, dl.ErrInvalidArgument) {
					return usageError{err}
				}
				if err != nil {
					return err
				}
				total := len(infos)
				if limit > 0 && len(infos) > limit {
					infos = infos[:limit]
				}
				if f.json {
					return writeJSON(out, infos)
				}
				printList(out, infos, total, time.Now())
				return nil
			}
			info, err := insp.Inspect(c.Context(), args[0])
			if errors.Is(err, dl.ErrInvalidName) {
				return usageError{err}
			}
			if err != nil {
				return err
			}
			if f.json {
				return writeJSON(out, info)
			}
			printInfo(out, info, time.Now())
			return nil
		},
	}
	f.register(c, false)
	c.Flags().StringVar(&pattern, "pattern", "", "list the held locks whose names match this glob (e.g. 'stock:*')")
	c.Flags().IntVar(&limit, "limit", 0, "with --pattern: show only the N oldest (0: all)")
	allowZero(c, "limit", "all")
	return c
}

// writeJSON writes v as inspect and unlock print it (see jsonView).
func writeJSON(w io.Writer, v any) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(jsonView(reflect.ValueOf(v)))
}

// The fields of dl.Info that printInfo lays out itself; any other field
// (queues, readers, permits, ...) is printed generically after them.
var knownInfoFields = map[string]bool{"Name": true, "Shape": true, "Held": true, "Holders": true, "TTL": true, "LastFence": true}

// printInfo prints one lock for people.
func printInfo(w io.Writer, info dl.Info, now time.Time) {
	var t table.Table
	add := func(name, value string) { t.Rows = append(t.Rows, []string{name, value}) }
	add("lock", info.Name)
	if !info.Held {
		add("state", "free")
	} else {
		add("state", "held")
		add("shape", info.Shape)
		add("ttl", formatTTL(info.TTL))
	}
	if info.LastFence != 0 {
		add("last token", strconv.FormatInt(info.LastFence, 10))
	}
	v := reflect.ValueOf(info)
	var tables []reflect.StructField
	for _, sf := range reflect.VisibleFields(v.Type()) {
		if !sf.IsExported() || knownInfoFields[sf.Name] {
			continue
		}
		fv := v.FieldByIndex(sf.Index)
		if isStructSlice(fv) {
			tables = append(tables, sf)
			continue
		}
		if !fv.IsZero() {
			add(label(sf.Name), formatValue(fv, now))
		}
	}
	_ = t.Write(w)
	if len(info.Holders) > 0 {
		fmt.Fprintf(w, "\nholders (%d):\n", len(info.Holders))
		_ = structTable(reflect.ValueOf(info.Holders), now).Write(w)
	}
	for _, sf := range tables {
		if fv := v.FieldByIndex(sf.Index); fv.Len() > 0 {
			fmt.Fprintf(w, "\n%s (%d):\n", label(sf.Name), fv.Len())
			_ = structTable(fv, now).Write(w)
		}
	}
}

// printList prints held locks, oldest first, one line each.
func printList(w io.Writer, infos []dl.Info, total int, now time.Time) {
	if total == 0 {
		fmt.Fprintln(w, "no held locks match")
		return
	}
	_ = table.Of([]table.Column[dl.Info]{
		table.Col("NAME", func(i dl.Info) string { return i.Name }),
		table.Col("SHAPE", func(i dl.Info) string { return i.Shape }),
		table.Col("AGE", func(i dl.Info) string {
			if len(i.Holders) == 0 || i.Holders[0].Since.IsZero() {
				return "-"
			}
			return now.Sub(i.Holders[0].Since).Round(time.Millisecond).String()
		}),
		table.Col("TTL", func(i dl.Info) string { return formatTTL(i.TTL) }),
		table.Col("HOLDERS", func(i dl.Info) string { return strconv.Itoa(len(i.Holders)) }),
		table.Col("TOKEN", func(i dl.Info) string {
			if len(i.Holders) == 0 {
				return "-"
			}
			return strconv.FormatInt(i.Holders[0].Fence, 10)
		}),
		table.Col("HOLDER", func(i dl.Info) string {
			if len(i.Holders) == 0 {
				return "-"
			}
			h := i.Holders[0]
			holder := fmt.Sprintf("%s %s/%d", h.ID, h.Host, h.PID)
			if h.Label != "" {
				holder += " " + h.Label
			}
			return holder
		}),
	}, infos).Write(w)
	if len(infos) < total {
		fmt.Fprintf(w, "%d of %d held locks (the oldest)\n", len(infos), total)
	} else {
		fmt.Fprintf(w, "%d held locks\n", total)
	}
}

// structTable lays a slice of structs out as a table (indented under its
// heading): one column per exported field that is set in some row, so
// fields added to the struct show up without changes here, and fields of
// other shapes stay out of the way.
func structTable(rows reflect.Value, now time.Time) table.Table {
	typ := rows.Type().Elem()
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	row := func(i int) reflect.Value {
		r := rows.Index(i)
		for r.Kind() == reflect.Pointer && !r.IsNil() {
			r = r.Elem()
		}
		return r
	}
	var fields []reflect.StructField
	for _, sf := range reflect.VisibleFields(typ) {
		if !sf.IsExported() || sf.Anonymous {
			continue
		}
		for i := range rows.Len() {
			if r := row(i); r.Kind() == reflect.Struct && !r.FieldByIndex(sf.Index).IsZero() {
				fields = append(fields, sf)
				break
			}
		}
	}
	t := table.Table{Indent: "  ", Head: make([]string, len(fields))}
	for i, sf := range fields {
		t.Head[i] = strings.ToUpper(label(sf.Name))
	}
	for i := range rows.Len() {
		r := row(i)
		cells := make([]string, len(fields))
		for j, sf := range fields {
			cells[j] = "-"
			if r.Kind() == reflect.Struct {
				cells[j] = formatValue(r.FieldByIndex(sf.Index), now)
			}
		}
		t.Rows = append(t.Rows, cells)
	}
	return t
}

func isStructSlice(v reflect.Value) bool {
	if v.Kind() != reflect.Slice {
		return false
	}
	e := v.Type().Elem()
	for e.Kind() == reflect.Pointer {
		e = e.Elem()
	}
	return e.Kind() == reflect.Struct && e != reflect.TypeOf(time.Time{})
}

var (
	durationType = reflect.TypeOf(time.Duration(0))
	timeType     = reflect.TypeOf(time.Time{})
)

// formatValue renders a field for people: times with their age, durations
// rounded to the millisecond, anything else as fmt does.
func formatValue(v reflect.Value, now time.Time) string {
	if !v.IsValid() {
		return "-"
	}
	switch v.Type() {
	case durationType:
		return formatTTL(time.Duration(v.Int()))
	case timeType:
		t := v.Interface().(time.Time)
		if t.IsZero() {
			return "-"
		}
		return fmt.Sprintf("%s (%s ago)", t.Format("2006-01-02T15:04:05.000Z07:00"), now.Sub(t).Round(time.Millisecond))
	}
	if v.Kind() == reflect.String && v.Len() == 0 {
		return "-"
	}
	return fmt.Sprint(v.Interface())
}

// formatTTL renders a remaining TTL; Redis reports -1 for a key without one.
func formatTTL(d time.Duration) string {
	if d < 0 {
		return "none"
	}
	return d.Round(time.Millisecond).String()
}

// label turns a Go field name into lower-case words: "LastFence" → "last fence".
func label(name string) string {
	var b strings.Builder
	for i, r := range name {
		if i > 0 && r >= 'A' && r <= 'Z' && !(name[i-1] >= 'A' && name[i-1] <= 'Z') {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return strings.ToLower(b.String())
}
