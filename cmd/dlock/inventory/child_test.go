package inventory_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/dlockgo/dlock/cmd/dlock/inventory"
	"github.com/redis/go-redis/v9"
)

// The test binary doubles as a stream consumer process that a test kills.
const (
	childEnv      = "INVENTORY_TEST_CHILD"
	childDSN      = "INVENTORY_TEST_DSN"
	childRedis    = "INVENTORY_TEST_REDIS"
	childSKU      = "INVENTORY_TEST_SKU"
	childName     = "INVENTORY_TEST_NAME"
	childApplyGap = 2 * time.Second // between an entry's SQL commit and its XACK
)

// childConsumer runs a Consumer that pauses between each commit and its
// XACK, so that a SIGKILL lands in that window. It gives up after two
// minutes in case its parent died without killing it.
func childConsumer() int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := inventory.Open(ctx, os.Getenv(childDSN))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer st.Close()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(childRedis)})
	defer rdb.Close()
	p, err := inventory.NewPrededuct(st, rdb, inventory.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c := p.NewConsumer(inventory.ConsumerOptions{Name: os.Getenv(childName), Batch: 100, Block: 100 * time.Millisecond})
	inventory.SetAfterApply(c, func(id string) {
		fmt.Println("committed", id) // the parent kills us after reading this
		time.Sleep(childApplyGap)
	})
	if err := c.Run(ctx, os.Getenv(childSKU)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
