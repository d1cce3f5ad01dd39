// Command etcdserver is the etcd server at the version the etcdlock tests
// pin (go.mod), built from source so the tests run the server the client
// was released with. It takes etcd's own flags.
//
// Build it where the test harness looks for it:
//
//	go build -o "${XDG_CACHE_HOME:-$HOME/.cache}/dlock/etcd-v3.7.3/etcd" .
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
