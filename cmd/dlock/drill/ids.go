package drill

import (
	"crypto/rand"
	"encoding/hex"
)

// randomID names one run's keys, so runs never collide on a shared server.
func randomID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
