// Command filegraph measures how the files of one Go package depend on each
// other: file A → file B when A uses a name declared at the top of B (a
// function, type, variable, constant, field or method), as the type checker
// resolves it.
// It prints the arrows that close a loop — the fewest arrows whose removal
// leaves the files in one-way order (a greedy feedback arc set) — and, with
// -v, every arrow. Test files are left out.
//
//	go run ./internal/filegraph [-v] [dir]
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	verbose := flag.Bool("v", false, "print every arrow")
	flag.Parse()
	dir := "."
	if flag.NArg() > 0 {
		dir = flag.Arg(0)
	}
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, pkg := range pkgs {
		report(fset, pkg, *verbose)
	}
}

func report(fset *token.FileSet, pkg *ast.Package, verbose bool) {
	var files []*ast.File
	for _, f := range pkg.Files {
		files = append(files, f)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil), Error: func(error) {}}
	_, _ = conf.Check(pkg.Name, fset, files, info)
	fileOf := func(p token.Pos) string {
		if !p.IsValid() {
			return ""
		}
		return filepath.Base(fset.Position(p).Filename)
	}
	mine := map[string]bool{}
	for path := range pkg.Files {
		mine[filepath.Base(path)] = true
	}
	edges := map[[2]string]bool{}
	add := func(from string, obj types.Object) {
		if obj == nil || obj.Pkg() == nil || obj.Pkg().Name() != pkg.Name {
			return
		}
		if to := fileOf(obj.Pos()); mine[to] && to != from {
			edges[[2]string{from, to}] = true
		}
	}
	for id, obj := range info.Uses {
		add(fileOf(id.Pos()), obj)
	}
	for sel, s := range info.Selections {
		add(fileOf(sel.Pos()), s.Obj())
	}
	back := feedbackArcs(edges)
	fmt.Printf("package %s: %d files, %d arrows, %d close a loop\n", pkg.Name, len(pkg.Files), len(edges), len(back))
	for _, e := range back {
		fmt.Printf("  loop: %s -> %s\n", e[0], e[1])
	}
	if verbose {
		var all [][2]string
		for e := range edges {
			all = append(all, e)
		}
		sort.Slice(all, func(i, j int) bool { return all[i][0]+all[i][1] < all[j][0]+all[j][1] })
		for _, e := range all {
			fmt.Printf("  %s -> %s\n", e[0], e[1])
		}
	}
}

// feedbackArcs orders the files greedily (Eades, Lin and Smyth: sinks last,
// sources first, else the file with the most outgoing minus incoming
// arrows) and returns the arrows that point back against that order.
func feedbackArcs(edges map[[2]string]bool) [][2]string {
	nodes := map[string]bool{}
	for e := range edges {
		nodes[e[0]], nodes[e[1]] = true, true
	}
	left := map[string]bool{}
	for n := range nodes {
		left[n] = true
	}
	deg := func(n string, out bool) int {
		d := 0
		for e := range edges {
			if left[e[0]] && left[e[1]] && ((out && e[0] == n) || (!out && e[1] == n)) {
				d++
			}
		}
		return d
	}
	var head, tail []string
	for len(left) > 0 {
		changed := true
		for changed {
			changed = false
			for _, n := range sorted(left) {
				if deg(n, true) == 0 {
					tail = append([]string{n}, tail...)
					delete(left, n)
					changed = true
				} else if deg(n, false) == 0 {
					head = append(head, n)
					delete(left, n)
					changed = true
				}
			}
		}
		if len(left) == 0 {
			break
		}
		best, bestScore := "", -1<<30
		for _, n := range sorted(left) {
			if s := deg(n, true) - deg(n, false); s > bestScore {
				best, bestScore = n, s
			}
		}
		head = append(head, best)
		delete(left, best)
	}
	pos := map[string]int{}
	for i, n := range append(head, tail...) {
		pos[n] = i
	}
	var back [][2]string
	for e := range edges {
		if pos[e[0]] > pos[e[1]] {
			back = append(back, e)
		}
	}
	sort.Slice(back, func(i, j int) bool { return back[i][0]+back[i][1] < back[j][0]+back[j][1] })
	return back
}

func sorted(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
