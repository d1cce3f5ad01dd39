package dlockfake_test

import (
	"testing"

	"github.com/dlockgo/dlock/internal/leakcheck"
)

// TestMain fails the package's tests if they leave a goroutine running: a
// Client starts none of its own.
func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }
