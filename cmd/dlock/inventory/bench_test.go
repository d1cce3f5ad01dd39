package inventory_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dlockgo/dlock/cmd/dlock/inventory"
)

// BenchmarkFlashSale runs whole flash sales: N buyers of one unit each,
// all started at once, against a stock of S, per store and strategy. One
// op is one sale. Metrics: orders/s (units sold / time until every buyer
// had an answer), answers/s (buyers answered, sold or not, per second), p50-ms and p99-ms (latency of one Buy, sold or not),
// sold, oversold; prededuct also reports persist-ms, the time its consumer
// then needed to write every order to SQL.
//
//	go test -run '^$' -bench FlashSale -benchtime 3x ./inventory
func BenchmarkFlashSale(b *testing.B) {
	ctx := context.Background()
	for _, sc := range []struct {
		buyers int
		stock  int64
	}{{500, 10}, {5000, 1000}} {
		for _, kind := range kinds {
			for _, name := range inventory.Names {
				b.Run(fmt.Sprintf("%dx%d/%s/%s", sc.buyers, sc.stock, kind, name), func(b *testing.B) {
					w := newWorld(b, kind)
					s := w.strategy(b, name, inventory.Options{Wait: 30 * time.Second})
					var sold, oversold int64
					var elapsed, persist time.Duration
					var lat []time.Duration
					b.ResetTimer()
					for i := range b.N {
						b.StopTimer()
						sku := fmt.Sprintf("s%d", i)
						w.addSKU(b, sku, sc.stock)
						p, _ := s.(*inventory.Prededuct)
						if p != nil {
							if _, err := p.WarmUp(ctx, sku); err != nil {
								b.Fatal(err)
							}
						}
						b.StartTimer()
						r := sale(ctx, s, sku, sc.buyers, fmt.Sprintf("%s-%d", name, i))
						b.StopTimer()
						if p != nil {
							t0 := time.Now()
							if err := p.NewConsumer(inventory.ConsumerOptions{}).Drain(ctx, sku); err != nil {
								b.Fatal(err)
							}
							persist += time.Since(t0)
						}
						rep, err := s.Reconcile(ctx, sku)
						if err != nil {
							b.Fatal(err)
						}
						if name != "naive" && !rep.Clean() {
							b.Fatalf("%s: %s", name, rep)
						}
						sold += rep.Units
						oversold += rep.Oversold
						elapsed += r.elapsed
						lat = append(lat, r.lat...)
						b.StartTimer()
					}
					b.StopTimer()
					slices.Sort(lat)
					b.ReportMetric(float64(sold)/elapsed.Seconds(), "orders/s")
					b.ReportMetric(float64(sc.buyers*b.N)/elapsed.Seconds(), "answers/s")
					b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
					b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
					b.ReportMetric(float64(sold)/float64(b.N), "sold")
					b.ReportMetric(float64(oversold)/float64(b.N), "oversold")
					if persist > 0 {
						b.ReportMetric(ms(persist)/float64(b.N), "persist-ms")
					}
				})
			}
		}
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
