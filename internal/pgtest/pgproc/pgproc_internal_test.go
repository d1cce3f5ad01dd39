package pgproc

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestVersionedPicksNewestAndMissingIsErrNoPostgres(t *testing.T) {
	root := t.TempDir()
	if _, _, err := versioned(root); !errors.Is(err, ErrNoPostgres) || !strings.Contains(err.Error(), "apt-get install postgresql") {
		t.Fatalf("no binaries: %v, want ErrNoPostgres with the install hint", err)
	}
	for _, v := range []string{"9", "15", "13"} {
		bin := filepath.Join(root, v, "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"initdb", "postgres"} {
			if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	initdb, postgres, err := versioned(root)
	if err != nil || initdb != filepath.Join(root, "15", "bin", "initdb") || postgres != filepath.Join(root, "15", "bin", "postgres") {
		t.Fatalf("got %q %q %v, want version 15's", initdb, postgres, err)
	}
}
