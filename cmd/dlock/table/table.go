// Package table is the one table printer of the dlock command: the drills'
// and the sale's tables, the lock signals, inspect's holders and lists, and
// every list of figures are laid out by Write, so their columns line up the
// same way everywhere.
package table

import (
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Table is rows of cells under optional headings.
type Table struct {
	// Title is a line above the table ("" for none).
	Title string
	// Head holds the column headings (nil for none).
	Head []string
	// Rows holds the cells, row by row; a short row leaves its last
	// columns empty.
	Rows [][]string
	// Notes are lines below the table.
	Notes []string
	// Indent starts every line of the table (not the title or the notes).
	Indent string
}

// Column is one column of a table of rows of type R: its heading and how a
// row fills its cell, side by side, so that a heading and its value cannot
// drift apart.
type Column[R any] struct {
	Head string
	Cell func(R) string
}

// Col returns the column headed head whose cells cell fills.
func Col[R any](head string, cell func(R) string) Column[R] { return Column[R]{Head: head, Cell: cell} }

// Of returns the table of rows under cols.
func Of[R any](cols []Column[R], rows []R) Table {
	t := Table{Head: make([]string, len(cols))}
	for i, c := range cols {
		t.Head[i] = c.Head
	}
	for _, r := range rows {
		cells := make([]string, len(cols))
		for i, c := range cols {
			cells[i] = c.Cell(r)
		}
		t.Rows = append(t.Rows, cells)
	}
	return t
}

// Write writes t as text: each column as wide as its widest cell, columns
// two spaces apart, a column of numbers right-aligned (its heading too),
// any other column left-aligned, and no trailing spaces.
func (t Table) Write(w io.Writer) error {
	var b strings.Builder
	n := len(t.RightAligned())
	if t.Title != "" {
		b.WriteString(t.Title + "\n")
	}
	width, right := make([]int, n), t.RightAligned()
	all := t.Rows
	if t.Head != nil {
		all = append([][]string{t.Head}, t.Rows...)
	}
	for _, r := range all {
		for i := range n {
			width[i] = max(width[i], utf8.RuneCountInString(cell(r, i)))
		}
	}
	for _, r := range all {
		var line strings.Builder
		line.WriteString(t.Indent)
		for i := range n {
			c := cell(r, i)
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if i > 0 {
				line.WriteString("  ")
			}
			if right[i] {
				line.WriteString(pad + c)
			} else {
				line.WriteString(c + pad)
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
	for _, s := range t.Notes {
		b.WriteString(s + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// RightAligned reports, column by column, whether the column holds numbers
// (and dashes or nothing for a missing value): those are right-aligned.
func (t Table) RightAligned() []bool {
	n := len(t.Head)
	for _, r := range t.Rows {
		n = max(n, len(r))
	}
	right := make([]bool, n)
	for i := range n {
		numbers, others := 0, 0
		for _, r := range t.Rows {
			switch c := cell(r, i); {
			case c == "" || c == "-":
			case isNumber(c):
				numbers++
			default:
				others++
			}
		}
		right[i] = numbers > 0 && others == 0
	}
	return right
}

func cell(r []string, i int) string {
	if i < len(r) {
		return r[i]
	}
	return ""
}

// isNumber reports whether a cell is a decimal number, a percentage
// included ("12", "-3.5", "0.0413%").
func isNumber(s string) bool {
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || digits[0] < '0' || digits[0] > '9' {
		return false
	}
	_, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	return err == nil
}
