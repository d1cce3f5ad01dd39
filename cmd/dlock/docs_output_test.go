package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dl "github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/cmd/dlock/backend"
	"github.com/redis/go-redis/v9"
)

var updateDocs = flag.Bool("update-docs", false, "TestDocsOutput: write today's output into the marked blocks of README.md and docs/")

// outputMarker is the comment that marks, on the line before it, a block of
// README.md or docs/*.md as what the dlock command prints.
const outputMarker = "<!-- output:"

// TestDocsOutput runs every sample output of the docs and compares it with
// what the command prints today, as TestDocsCode does for the Go blocks. A
// marked block (outputMarker on the line before the fence) holds one or
// more commands, each a "$ dlock ARGS" (or "$ go run ./cmd/dlock ARGS")
// line followed by what a terminal shows: stderr and stdout in the order
// they were written, without the progress lines a terminal redraws in place
// and erases, with the answer typed at a "[y/N]" prompt. A line "…" stands
// for any number of lines left out.
//
// What varies from run to run is masked on both sides: numbers (counts,
// times, ports, tokens, pids), Go durations, 8-digit hex ids, the lengths of
// histogram bars and the width of the columns; a row repeated with other
// numbers counts as one, and the lines of a timeline ("  12.3 ms  A   …")
// are compared as a set, since concurrent actors interleave differently from
// one run to the next. What is left — the words, and the shape line by line
// — must match. Help texts (--help) are compared exactly.
//
// inspect and unlock read locks held for them on a server of their own (see
// docsHolders); the address a doc gives them is replaced by that server's.
//
// go test -run TestDocsOutput -update-docs writes today's output into the
// blocks (keeping their "$" lines and their "…"), for a change that alters
// what the command prints.
func TestDocsOutput(t *testing.T) {
	docs, _ := filepath.Glob("../../docs/*.md")
	docs = append(docs, "../../README.md")
	blocks := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		src := string(b)
		var edits []edit
		for _, blk := range outputBlocks(src) {
			blocks++
			name := fmt.Sprintf("%s:%d", filepath.Base(doc), blk.line)
			t.Run(name, func(t *testing.T) {
				body := checkBlock(t, blk.body)
				if *updateDocs {
					edits = append(edits, edit{blk.start, blk.end, body})
				}
			})
		}
		if len(edits) > 0 {
			for _, e := range slices.Backward(edits) {
				src = src[:e.start] + e.text + src[e.end:]
			}
			if err := os.WriteFile(doc, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d block(s) rewritten", doc, len(edits))
		}
	}
	if blocks == 0 {
		t.Fatal("no marked output block in the docs")
	}
}

type edit struct {
	start, end int
	text       string
}

// docBlock is a marked block: its body (between the fences, with its final
// newline), the body's offsets in the file and the fence's line.
type docBlock struct {
	body       string
	start, end int
	line       int
}

var fencedBlock = regexp.MustCompile("(?ms)^```[a-z]*\n(.*?)^```")

// outputBlocks returns the marked blocks of a document.
func outputBlocks(src string) []docBlock {
	var out []docBlock
	for _, m := range fencedBlock.FindAllStringSubmatchIndex(src, -1) {
		before := strings.TrimRight(src[:m[0]], "\n")
		prev := before[strings.LastIndex(before, "\n")+1:]
		if !strings.HasPrefix(prev, outputMarker) {
			continue
		}
		out = append(out, docBlock{src[m[2]:m[3]], m[2], m[3], 1 + strings.Count(src[:m[0]], "\n")})
	}
	return out
}

// checkBlock runs the commands of a block and compares their output. It
// returns the block's body rewritten with today's output.
func checkBlock(t *testing.T, body string) string {
	lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "$ ") {
		t.Fatalf("a marked output block starts with a \"$ dlock …\" line, not %q", lines[0])
	}
	var out []string
	for len(lines) > 0 {
		cmd := lines[0]
		n := 1
		for n < len(lines) && !strings.HasPrefix(lines[n], "$ ") {
			n++
		}
		want := lines[1:n]
		lines = lines[n:]
		args, err := commandArgs(strings.TrimPrefix(cmd, "$ "))
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		got := runDocCommand(t, args, want)
		exact := slices.Contains(args, "--help") || slices.Contains(args, "-h")
		fresh, match := compareOutput(want, got, exact)
		switch {
		case !match && *updateDocs:
			t.Logf("%s: rewritten; it differed from the doc's.\n%s", cmd, fresh.diff)
		case !match:
			t.Errorf("%s: the output differs from the doc's.\n%s\ntoday's output:\n%s", cmd, fresh.diff, strings.Join(got, "\n"))
		}
		if len(out) > 0 {
			out = append(out, "")
		}
		out = append(out, cmd)
		out = append(out, fresh.lines...)
	}
	return strings.Join(out, "\n") + "\n"
}

// commandArgs reads a "$" line's command: dlock or go run ./cmd/dlock, then
// its arguments, split as a shell would (quotes; a "#" word begins a
// comment).
func commandArgs(line string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case r == '#' && !inWord:
			goto done
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
done:
	if quote != 0 {
		return nil, fmt.Errorf("unterminated quote")
	}
	if inWord {
		words = append(words, w.String())
	}
	switch {
	case len(words) >= 1 && words[0] == "dlock":
		return words[1:], nil
	case len(words) >= 3 && words[0] == "go" && words[1] == "run" && words[2] == "./cmd/dlock":
		return words[3:], nil
	}
	return nil, fmt.Errorf("not a dlock command")
}

// runDocCommand runs the command in-process, on the servers a doc command
// needs (docsHolders), and returns the lines a terminal would show.
func runDocCommand(t *testing.T, args []string, want []string) []string {
	t.Helper()
	if len(args) > 0 && (args[0] == "inspect" || args[0] == "unlock") && !slices.Contains(args, "--help") {
		args = docsHolders(t, args)
	}
	var answer string
	for _, l := range want {
		if i := strings.LastIndex(l, "[y/N] "); i >= 0 {
			answer = l[i+len("[y/N] "):] + "\n"
		}
	}
	term := &terminal{}
	restore := term.stdin(t, answer)
	defer restore()
	code := run(context.Background(), args, term.writer(false), term.writer(true))
	lines := term.lines()
	if code != 0 && !slices.ContainsFunc(want, func(l string) bool { return strings.HasPrefix(l, "dlock: ") }) {
		t.Errorf("dlock %s: exit %d", strings.Join(args, " "), code)
	}
	return lines
}

// terminal collects what a command writes to stdout and stderr, line by line
// in the order written, as a terminal shows it.
type terminal struct {
	mu      sync.Mutex
	out     []string
	partial [2]bytes.Buffer // stdout's, stderr's unfinished line
	prompt  chan struct{}   // closed when stderr shows a [y/N] prompt
}

// progressReport is a progress report (progress.go), drawn in place and erased
// on a terminal.
var progressReport = regexp.MustCompile(`^[\w -]+: \d+/\d+ \(\d+%\), \S+ elapsed$`)

func (term *terminal) writer(stderr bool) io.Writer {
	i := 0
	if stderr {
		i = 1
	}
	return writerFunc(func(p []byte) (int, error) {
		term.mu.Lock()
		defer term.mu.Unlock()
		term.partial[i].Write(p)
		for {
			b := term.partial[i].Bytes()
			n := bytes.IndexByte(b, '\n')
			if n < 0 {
				break
			}
			line := string(b[:n])
			term.partial[i].Next(n + 1)
			if !(stderr && progressReport.MatchString(line)) {
				term.out = append(term.out, line)
			}
		}
		if stderr && term.prompt != nil && strings.HasSuffix(term.partial[i].String(), "[y/N] ") {
			close(term.prompt)
			term.prompt = nil
		}
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// stdin gives the command a stdin on which answer is typed once a prompt
// shows, echoed as a terminal does; it returns the function that restores
// os.Stdin.
func (term *terminal) stdin(t *testing.T, answer string) func() {
	if answer == "" {
		return func() {}
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	prompt, stop, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	term.prompt = prompt
	saved := os.Stdin
	os.Stdin = r
	go func() {
		defer close(done)
		defer w.Close()
		select {
		case <-prompt:
		case <-stop:
			return
		}
		// Typed, and echoed: the answer ends the prompt's line.
		_, _ = term.writer(true).Write([]byte(answer))
		_, _ = io.WriteString(w, answer)
	}()
	return func() {
		os.Stdin = saved
		close(stop)
		<-done
		_ = r.Close()
	}
}

func (term *terminal) lines() []string {
	term.mu.Lock()
	defer term.mu.Unlock()
	out := term.out
	for i := range term.partial {
		if term.partial[i].Len() > 0 {
			out = append(out, term.partial[i].String())
		}
	}
	return out
}

// docsHolders starts the server an inspect or unlock command of the docs
// reads, holds there the locks the docs show — on Redis stock:1001 (a Lock
// entered twice) and order:77:pay (a Mutex), on etcd and ZooKeeper
// scheduler (a Mutex), each by a client labelled shop-api-1 — and returns
// args with the doc's server address replaced by that server's.
func docsHolders(t *testing.T, args []string) []string {
	t.Helper()
	ctx := context.Background()
	kind, flagName := backend.Redis, "--redis"
	if i := slices.Index(args, "--backend"); i >= 0 && i+1 < len(args) {
		kind = args[i+1]
		flagName = map[string]string{backend.Etcd: "--etcd", backend.ZooKeeper: "--zk"}[kind]
	}
	b, err := backend.Open(ctx, kind, "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := b.NewClient(ctx, backend.ClientOptions{Label: "shop-api-1"})
	if err != nil {
		_ = b.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(); _ = b.Close() })
	hold := func(ctx context.Context, l dl.Locker) context.Context {
		lease, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return lease.Context()
	}
	if kind == backend.Redis {
		held := hold(ctx, c.Lock("stock:1001"))
		hold(held, c.Lock("stock:1001")) // re-entered: count 2
		// inspect --pattern lists the oldest first, by the grant's time
		// in milliseconds (Redis TIME): the second lock is younger, granted
		// once the server's clock is past the first grant's millisecond.
		rdb := redisOf(t, b.Addr)
		first := redisMS(t, rdb)
		for deadline := time.Now().Add(5 * time.Second); redisMS(t, rdb) <= first; {
			if time.Now().After(deadline) {
				t.Fatalf("Redis TIME stayed at %d ms for 5 s", first)
			}
		}
		hold(ctx, c.Mutex("order:77:pay"))
	} else {
		hold(ctx, c.Mutex("scheduler"))
	}
	out := slices.Clone(args)
	if i := slices.Index(out, flagName); i >= 0 && i+1 < len(out) {
		out[i+1] = b.Addr
	} else {
		t.Fatalf("the doc's command names no %s: the test cannot point it at its server", flagName)
	}
	return out
}

// redisMS is the Redis server's clock (TIME) in milliseconds.
func redisMS(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now.UnixMilli()
}

// compared is a block's output as the docs should now show it, and the
// difference found, if any.
type compared struct {
	lines []string
	diff  string
}

// compareOutput compares the lines of a doc (with "…") with the lines a
// command printed, masked unless exact. It returns the doc's lines rewritten
// with today's output, keeping the doc's "…" where they still match.
func compareOutput(want, got []string, exact bool) (compared, bool) {
	w := outputItems(trimBlank(want), exact)
	g := outputItems(trimBlank(got), exact)
	align, diff := matchItems(w, g)
	if diff != "" {
		return compared{lines: trimBlank(got), diff: diff}, false
	}
	var lines []string
	for k, it := range w {
		if it.skip {
			lines = append(lines, "…")
			continue
		}
		for _, j := range align[k] {
			lines = append(lines, g[j].lines...)
		}
	}
	return compared{lines: lines}, true
}

func trimBlank(lines []string) []string {
	for len(lines) > 0 && strings.TrimSpace(lines[0]) == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// item is what is compared: a line (with the lines after it that mask the
// same), a run of timeline lines (compared as a set), or an elision.
type item struct {
	lines    []string // as printed
	keys     []string // masked
	timeline bool
	skip     bool
}

var timelineLine = regexp.MustCompile(`^\s*\d+(\.\d+)? ms  `)

func outputItems(lines []string, exact bool) []item {
	var items []item
	for _, l := range lines {
		l = strings.TrimRight(l, " ")
		if !exact && (l == "…" || l == "...") {
			items = append(items, item{skip: true})
			continue
		}
		key := l
		if !exact {
			key = mask(l)
		}
		last := len(items) - 1
		switch {
		case !exact && timelineLine.MatchString(l):
			if last < 0 || !items[last].timeline {
				items = append(items, item{timeline: true})
				last++
			}
			items[last].lines = append(items[last].lines, l)
			if !slices.Contains(items[last].keys, key) {
				items[last].keys = append(items[last].keys, key)
			}
		case !exact && last >= 0 && !items[last].timeline && !items[last].skip && items[last].keys[0] == key:
			items[last].lines = append(items[last].lines, l)
		default:
			items = append(items, item{lines: []string{l}, keys: []string{key}})
		}
	}
	return items
}

func sameItem(a, b item) bool {
	if a.skip || b.skip || a.timeline != b.timeline || len(a.keys) != len(b.keys) {
		return false
	}
	for _, k := range a.keys {
		if !slices.Contains(b.keys, k) {
			return false
		}
	}
	return true
}

// matchItems matches the doc's items w with the output's g, an elision
// matching any run of items. It returns, for each doc item, the output items
// it matched, or else where the two part.
func matchItems(w, g []item) (align [][]int, diff string) {
	// reach[i][j]: w[:i] matches g[:j].
	reach := make([][]bool, len(w)+1)
	for i := range reach {
		reach[i] = make([]bool, len(g)+1)
	}
	reach[0][0] = true
	for i, it := range w {
		for j := 0; j <= len(g); j++ {
			switch {
			case !reach[i][j]:
			case it.skip:
				for k := j; k <= len(g); k++ {
					reach[i+1][k] = true
				}
			case j < len(g) && sameItem(it, g[j]):
				reach[i+1][j+1] = true
			}
		}
		if !slices.Contains(reach[i+1], true) {
			j := slices.Index(reach[i], true)
			if j == len(g) {
				return nil, "the doc goes on where the output has ended:\n  doc:    " + strings.Join(it.keys, "\n          ")
			}
			return nil, "first difference (masked):\n  doc:    " + strings.Join(it.keys, "\n          ") +
				"\n  output: " + strings.Join(g[j].keys, "\n          ")
		}
	}
	if !reach[len(w)][len(g)] {
		j := len(g) - 1
		for !reach[len(w)][j] {
			j--
		}
		return nil, "the output goes on where the doc has ended:\n  output: " + strings.Join(g[j].keys, "\n          ")
	}
	// Back from the end: an elision takes as few items as it can.
	align = make([][]int, len(w))
	j := len(g)
	for i := len(w) - 1; i >= 0; i-- {
		k := j - 1
		if w[i].skip {
			k = j
			for !reach[i][k] {
				k--
			}
		}
		for x := k; x < j; x++ {
			align[i] = append(align[i], x)
		}
		j = k
	}
	return align, ""
}

var masks = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\b[0-9a-f]{8}\b`), "#"},                          // ids
	{regexp.MustCompile(`\b(\d+(\.\d+)?(ns|µs|us|ms|s|m|h))+\b`), "#dur"}, // Go durations
	{regexp.MustCompile(`\d+(\.\d+)?`), "#"},                              // numbers
	{regexp.MustCompile(`\b(\pL{3,})s\b`), "$1"},                          // plurals (1 run, 2 runs)
	{regexp.MustCompile(`█+`), ""},                                        // bars
	{regexp.MustCompile(`\s+`), " "},                                      // column widths
}

// mask replaces what varies from run to run in a line of output.
func mask(line string) string {
	for _, m := range masks {
		line = m.re.ReplaceAllString(line, m.with)
	}
	return strings.TrimSpace(line)
}

// The comparison TestDocsOutput makes: what varies is masked, words and
// shape are not.
func TestDocsOutputCompare(t *testing.T) {
	doc := strings.Split(`redis: redis-server (embedded, 127.0.0.1:41807)

       0.5 ms  A   acquired, lease 200ms, token 1796164653186774
     604.1 ms  A   resumes, Unlock: dlock: hold mutex "drill:misdelete:2ea16ae2": lock lost (expired)
     603.6 ms  B   acquired, token 1796164653487536; alone inside: A's hold ended 103.4 ms before

      2.0 –     5.0 ms │████████████████████████████████████████ 199
…
acquisitions                     200 in 564 ms: 355/s`, "\n")
	same := strings.Split(`redis: redis-server (embedded, 127.0.0.1:9)

       1.5 ms  A   acquired, lease 200ms, token 17
     650.0 ms  B   acquired, token 18; alone inside: A's hold ended 3.4 ms before
     651.0 ms  A   resumes, Unlock: dlock: hold mutex "drill:misdelete:0000beef": lock lost (expired)

      1.0 –     2.0 ms │█                                        1
      2.0 –     5.0 ms │                                         0
extra lines the doc left out

acquisitions                     20 in 1564 ms: 12/s`, "\n")
	fresh, ok := compareOutput(doc, same, false)
	if !ok {
		t.Fatalf("other numbers, ids, order of a timeline, bars, an elision: %s", fresh.diff)
	}
	if want := strings.Join(same[:8], "\n") + "\n…\n" + same[len(same)-1]; strings.Join(fresh.lines, "\n") != want {
		t.Errorf("rewritten as\n%s\nwant\n%s", strings.Join(fresh.lines, "\n"), want)
	}
	for _, changed := range []struct{ from, to string }{
		{"hold mutex", "mutex"},                  // a word
		{"lock lost (expired)", "lock lost"},     // words gone
		{"alone inside", "A is inside too"},      // another verdict in a timeline
		{"acquisitions  ", "grants  "},           // a label after the elision
		{"redis: redis-server", "redis: redis "}, // the first line
	} {
		var out []string
		for _, l := range same {
			out = append(out, strings.Replace(l, changed.from, changed.to, 1))
		}
		if _, ok := compareOutput(doc, out, false); ok {
			t.Errorf("%q → %q: still matches", changed.from, changed.to)
		}
	}
	if _, ok := compareOutput(doc, same[:3], false); ok {
		t.Error("an output missing lines matches")
	}
	if _, ok := compareOutput([]string{"      --buyers int   buyers (default 500)"}, []string{"      --buyers int   buyers (default 50)"}, true); ok {
		t.Error("help texts are compared exactly, and a default changed")
	}
}
