package dlock_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsCode checks that every Go block of README.md and docs/*.md is code
// the tests compile: each block's lines appear, in order and together, in a
// _test.go file of the repository (whitespace aside), where `go vet` and `go
// test` build them and most run as Examples. A block that matches nothing was
// edited in the docs only, or its code was changed without the docs.
func TestDocsCode(t *testing.T) {
	docs, _ := filepath.Glob("docs/*.md")
	docs = append(docs, "README.md")
	var sources [][]string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != "." {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, "_test.go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sources = append(sources, codeLines(string(b)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	blocks := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range goBlock.FindAllStringSubmatchIndex(string(b), -1) {
			blocks++
			block := codeLines(string(b)[m[2]:m[3]])
			line := 1 + strings.Count(string(b)[:m[0]], "\n")
			if !foundIn(block, sources) {
				t.Errorf("%s:%d: this Go block is in no _test.go file; write it as (part of) an Example and copy it here:\n%s",
					doc, line, strings.Join(block, "\n"))
			}
		}
	}
	if blocks == 0 {
		t.Fatal("no Go block found in the docs")
	}
}

var goBlock = regexp.MustCompile("(?ms)^```go\n(.*?)^```")

// codeLines returns the non-blank lines of src, each with its runs of
// whitespace made one space.
func codeLines(src string) []string {
	var lines []string
	for l := range strings.SplitSeq(src, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			lines = append(lines, strings.Join(f, " "))
		}
	}
	return lines
}

// foundIn says whether block is a run of consecutive lines of one source.
func foundIn(block []string, sources [][]string) bool {
	for _, src := range sources {
		for i := 0; i+len(block) <= len(src); i++ {
			if equalLines(src[i:i+len(block)], block) {
				return true
			}
		}
	}
	return false
}

func equalLines(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
