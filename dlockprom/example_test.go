package dlockprom_test

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/dlockprom"
	"github.com/dlockgo/dlock/observe"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
)

// Wire the observer into a Client and serve the metrics.
func ExampleNew() {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("service", "shop")
	obs, err := dlockprom.New(
		dlockprom.WithLogger(logger),              // slow holds are logged at Warn
		dlockprom.WithSlowHold(3*time.Second),     // the default
		dlockprom.WithGroup(observe.DefaultGroup), // "stock:1001" → group "stock"
	)
	if err != nil {
		panic(err)
	}
	prometheus.MustRegister(obs)
	http.Handle("/metrics", promhttp.Handler())

	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	client, err := dlock.New(rdb, dlock.Config{Observer: obs})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	_ = dlock.Do(context.Background(), client.Mutex("stock:1001"), func(ctx context.Context, l *dlock.Lease) error {
		return nil // the critical section
	}, dlock.Wait(3*time.Second))
}
