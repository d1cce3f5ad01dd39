package etcdlock

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Key layout, under the Client's prefix (default "dlock/"):
//
//	<prefix><kind>/<len(name)>:<name>/<holder>          mutex, lock, semaphore
//	<prefix>rw/<len(name)>:<name>/{r,w,d}/<holder>      read, write, downgrade
//
// The length in front of the name keeps one lock's directory from being a
// prefix of another's ("a" and "a/b" are "1:a/" and "3:a/b/"). A holder is
// the session lease in hex and a random id: one key per acquisition, never
// reused, so a retried release can never delete a later acquisition.

// dir returns the key directory of the lock of kind called name.
func (c *Client) dir(kind, name string) string {
	return c.prefix + kind + "/" + strconv.Itoa(len(name)) + ":" + name + "/"
}

// holderKey returns a new key in dir for a holder on lease.
func holderKey(dir string, lease clientv3.LeaseID) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails (Go 1.24+)
	return dir + strconv.FormatInt(int64(lease), 16) + "-" + hex.EncodeToString(b)
}
