package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"text/tabwriter"
	"time"

	dl "github.com/dlockgo/dlock" // dl: "dlock" is taken by the tests' helper
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
)

// defaultAdminRedis is the server inspect and unlock talk to without
// --redis: the local default, as redis-cli assumes.
const defaultAdminRedis = "redis://127.0.0.1:6379/0"

// adminExitCodes is the exit-code paragraph of inspect's and unlock's help.
const adminExitCodes = "Exit codes: 0 done; 1 a runtime failure (Redis unreachable or failing, unlock not\n" +
	"confirmed); 2 bad input (unknown flag, bad --redis URL or --prefix, invalid lock name, wrong arguments)."

// adminFlags are the flags of the operator commands (inspect, unlock).
type adminFlags struct {
	redis   string
	cluster bool
	prefix  string
	json    bool
}

func (f *adminFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.redis, "redis", defaultAdminRedis, "Redis URL (redis:// or rediss://host:port/db)")
	c.Flags().BoolVar(&f.cluster, "cluster", false, "the URL names a Redis Cluster node (more seeds: ?addr=host:port&addr=...)")
	c.Flags().StringVar(&f.prefix, "prefix", dl.DefaultPrefix, "key prefix of the locks (dl.WithPrefix)")
	c.Flags().BoolVar(&f.json, "json", false, "print JSON: snake_case keys, durations in ms (ttl_ms; -1: no TTL), times in RFC 3339, [] when empty")
}

// open connects to the server: a bad URL or prefix is a usage error (exit
// 2), an unreachable server a runtime failure (exit 1). The caller closes
// both.
func (f *adminFlags) open(ctx context.Context) (*dl.Client, redis.UniversalClient, error) {
	redis.SetLogger(quietLogger{}) // the error below says it once; go-redis would log every dial
	var rdb redis.UniversalClient
	if f.cluster {
		o, err := redis.ParseClusterURL(f.redis)
		if err != nil {
			return nil, nil, usagef("--redis %q: %v", redactURL(f.redis), err)
		}
		rdb = redis.NewClusterClient(o)
	} else {
		o, err := redis.ParseURL(f.redis)
		if err != nil {
			return nil, nil, usagef("--redis %q: %v", redactURL(f.redis), err)
		}
		rdb = redis.NewClient(o)
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, nil, fmt.Errorf("redis %s: unreachable: %w", redactURL(f.redis), err)
	}
	c, err := dl.New(rdb, dl.WithPrefix(f.prefix))
	if err != nil {
		_ = rdb.Close()
		return nil, nil, usagef("--prefix %q: %v", f.prefix, err)
	}
	return c, rdb, nil
}

func newInspectCmd() *cobra.Command {
	var f adminFlags
	var pattern string
	var limit int
	c := &cobra.Command{
		Use:   "inspect [NAME | --pattern GLOB]",
		Short: "Show who holds a lock, or list held locks oldest first",
		Long: "inspect NAME shows one lock of any shape: its holders (id, host, pid, label, since, hold count,\n" +
			"fencing token), the remaining TTL, the last fencing token granted, and whatever else the lock\n" +
			"keeps (queues, readers, permits).\n\n" +
			"inspect --pattern GLOB lists the held locks whose names match, oldest first, so a stuck\n" +
			"holder stands out. It uses SCAN, never KEYS (on a cluster: every master).\n\n" + adminExitCodes,
		Example: "  dlock inspect stock:1001 --redis redis://10.0.0.5:6379/0\n" +
			"  dlock inspect --pattern 'stock:*' --limit 20\n" +
			"  dlock inspect --pattern '*' --json | jq '.[0]'",
		RunE: func(c *cobra.Command, args []string) error {
			switch {
			case len(args) > 1:
				return usagef("inspect: one lock name at a time (got %d)", len(args))
			case len(args) == 1 && pattern != "":
				return usagef("inspect: give a NAME or --pattern, not both")
			case len(args) == 0 && pattern == "":
				return usagef("inspect: give a lock NAME or --pattern GLOB")
			case limit < 0:
				return usagef("inspect: --limit must be >= 0")
			}
			client, rdb, err := f.open(c.Context())
			if err != nil {
				return err
			}
			defer rdb.Close()
			defer client.Close()
			out := c.OutOrStdout()
			if pattern != "" {
				infos, err := client.List(c.Context(), pattern)
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
			info, err := client.Inspect(c.Context(), args[0])
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
	f.register(c)
	c.Flags().StringVar(&pattern, "pattern", "", "list the held locks whose names match this glob (e.g. 'stock:*')")
	c.Flags().IntVar(&limit, "limit", 0, "with --pattern: show only the N oldest (0: all)")
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
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "lock\t%s\n", info.Name)
	if !info.Held {
		fmt.Fprintf(tw, "state\tfree\n")
	} else {
		fmt.Fprintf(tw, "state\theld\n")
		fmt.Fprintf(tw, "shape\t%s\n", info.Shape)
		fmt.Fprintf(tw, "ttl\t%s\n", formatTTL(info.TTL))
	}
	if info.LastFence != 0 {
		fmt.Fprintf(tw, "last token\t%d\n", info.LastFence)
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
			fmt.Fprintf(tw, "%s\t%s\n", label(sf.Name), formatValue(fv, now))
		}
	}
	_ = tw.Flush()
	if len(info.Holders) > 0 {
		fmt.Fprintf(w, "\nholders (%d):\n", len(info.Holders))
		printTable(w, reflect.ValueOf(info.Holders), now)
	}
	for _, sf := range tables {
		if fv := v.FieldByIndex(sf.Index); fv.Len() > 0 {
			fmt.Fprintf(w, "\n%s (%d):\n", label(sf.Name), fv.Len())
			printTable(w, fv, now)
		}
	}
}

// printList prints held locks, oldest first, one line each.
func printList(w io.Writer, infos []dl.Info, total int, now time.Time) {
	if total == 0 {
		fmt.Fprintln(w, "no held locks match")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSHAPE\tAGE\tTTL\tHOLDERS\tTOKEN\tHOLDER")
	for _, info := range infos {
		age, token, holder := "-", "-", "-"
		if len(info.Holders) > 0 {
			h := info.Holders[0]
			if !h.Since.IsZero() {
				age = now.Sub(h.Since).Round(time.Millisecond).String()
			}
			token = fmt.Sprint(h.Fence)
			holder = fmt.Sprintf("%s %s/%d", h.ID, h.Host, h.PID)
			if h.Label != "" {
				holder += " " + h.Label
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", info.Name, info.Shape, age, formatTTL(info.TTL), len(info.Holders), token, holder)
	}
	_ = tw.Flush()
	if len(infos) < total {
		fmt.Fprintf(w, "%d of %d held locks (the oldest)\n", len(infos), total)
	} else {
		fmt.Fprintf(w, "%d held locks\n", total)
	}
}

// printTable prints a slice of structs as a table: one column per exported
// field that is set in some row, so fields added to the struct show up
// without changes here, and fields of other shapes stay out of the way.
func printTable(w io.Writer, rows reflect.Value, now time.Time) {
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
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := make([]string, len(fields))
	for i, sf := range fields {
		head[i] = strings.ToUpper(label(sf.Name))
	}
	fmt.Fprintln(tw, "  "+strings.Join(head, "\t"))
	for i := range rows.Len() {
		r := row(i)
		cells := make([]string, len(fields))
		for j, sf := range fields {
			cells[j] = "-"
			if r.Kind() == reflect.Struct {
				cells[j] = formatValue(r.FieldByIndex(sf.Index), now)
			}
		}
		fmt.Fprintln(tw, "  "+strings.Join(cells, "\t"))
	}
	_ = tw.Flush()
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
