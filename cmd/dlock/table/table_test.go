package table_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/dlockgo/dlock/cmd/dlock/table"
)

// Columns of numbers are right-aligned, others left-aligned; every column
// is as wide as its widest cell; no line ends in spaces.
func TestWrite(t *testing.T) {
	type row struct {
		name string
		n    int
		rate float64
	}
	tb := table.Of([]table.Column[row]{
		table.Col("name", func(r row) string { return r.name }),
		table.Col("count", func(r row) string { return strconv.Itoa(r.n) }),
		table.Col("rate", func(r row) string { return strconv.FormatFloat(r.rate, 'f', 2, 64) + "%" }),
		table.Col("note", func(r row) string { return "" }),
	}, []row{{"a", 5, 1.5}, {"longer", 12345, 22.25}})
	tb.Title, tb.Notes, tb.Indent = "title:", []string{"  a note"}, "  "
	var b strings.Builder
	if err := tb.Write(&b); err != nil {
		t.Fatal(err)
	}
	want := "title:\n" +
		"  name    count    rate  note\n" +
		"  a           5   1.50%\n" +
		"  longer  12345  22.25%\n" +
		"  a note\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// A column with any word in it is left-aligned; dashes and empty cells do
// not decide; a table without headings prints its rows only.
func TestWriteMixed(t *testing.T) {
	tb := table.Table{Rows: [][]string{{"state", "held"}, {"ttl", "1.5s"}, {"token", "-"}, {"x", "12", "extra"}}}
	if got := tb.RightAligned(); len(got) != 3 || got[0] || got[1] || got[2] {
		t.Fatalf("right-aligned %v, want none of 3 columns", got)
	}
	var b strings.Builder
	_ = tb.Write(&b)
	want := "state  held\nttl    1.5s\ntoken  -\nx      12    extra\n"
	if b.String() != want {
		t.Fatalf("got\n%q\nwant\n%q", b.String(), want)
	}
	nums := table.Table{Head: []string{"n"}, Rows: [][]string{{"-"}, {"7"}, {""}, {"-0.5"}}}
	if got := nums.RightAligned(); !got[0] {
		t.Fatal("a column of numbers and dashes is not right-aligned")
	}
	words := table.Table{Rows: [][]string{{"inf"}, {"NaN"}, {"0x10"}}}
	if got := words.RightAligned(); got[0] {
		t.Fatal("inf, NaN and 0x10 were taken for numbers")
	}
}
