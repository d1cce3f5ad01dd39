package dlock

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// keySlot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of its
// hash tag (the part between the first '{' and the next '}', if not empty),
// or of the whole key, modulo 16384, as the Cluster specification defines it.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^key[k]]
	}
	return int(crc) % 16384
}

// crc16Table is CRC16-XMODEM (polynomial 0x1021) of every byte.
var crc16Table = func() (t [256]uint16) {
	for b := range t {
		crc := uint16(b) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[b] = crc
	}
	return t
}()

// slotTag returns a hash tag whose slot is slot: the decimal digits of the
// smallest number whose key slot is slot. The fence counter of a slot's
// locks is the key <prefix>fence:{<tag>}, in the slot of the locks it
// serves.
func slotTag(slot int) string {
	return strconv.FormatUint(uint64(slotTags()[slot]), 10)
}

// slotTags is slotTag's table, made on first use (about 200 000 CRC16 sums
// of a few digits).
var slotTags = sync.OnceValue(func() *[16384]uint32 {
	var t [16384]uint32
	var found [16384]bool
	var buf [12]byte
	for n, left := uint32(0), len(t); left > 0; n++ {
		s := keySlot(string(strconv.AppendUint(buf[:0], uint64(n), 10)))
		if !found[s] {
			found[s], t[s] = true, n
			left--
		}
	}
	return &t
})

// clusterRetry is how soon an attempt refused by a moving slot or an
// electing cluster is tried again.
const clusterRetry = 20 * time.Millisecond

// clusterPassing reports whether err is a Redis Cluster's answer for a
// passing state in which the command did not run.
func clusterPassing(err error) bool {
	for _, p := range []string{"TRYAGAIN", "ASK", "MOVED", "CLUSTERDOWN"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}
