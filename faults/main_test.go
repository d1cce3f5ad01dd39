package faults_test

import (
	"os"
	"testing"
)

// TestMain runs the paused holder when the test binary is re-executed as
// one (see pause_test.go), and the tests otherwise.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runHolderChild(os.Args[len(os.Args)-3:]))
	}
	os.Exit(m.Run())
}
