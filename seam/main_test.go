package seam

import (
	"testing"

	"github.com/dlockgo/dlock/internal/leakcheck"
)

// TestMain fails the package's tests if they leave a goroutine running (a
// Keeper's timer or a Lease's OnLost that outlives Close).
func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }
