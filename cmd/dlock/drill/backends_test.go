package drill_test

import (
	"context"
	"testing"

	"github.com/dlockgo/dlock/cmd/dlock/backend"
)

// openBackend starts the embedded server of kind for one test.
func openBackend(t *testing.T, kind string) *backend.Backend {
	t.Helper()
	b, err := backend.Open(context.Background(), kind, "")
	if err != nil {
		t.Fatalf("embedded %s: %v", kind, err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}
