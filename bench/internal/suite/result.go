package suite

import (
	"time"

	"github.com/dlockgo/dlock/bench/internal/libs"
	"github.com/dlockgo/dlock/bench/internal/measure"
)

// Measurement is one measured run of one library in one scenario.
type Measurement struct {
	Round   int           `json:"round"`
	Order   int           `json:"order"` // position in its round
	Elapsed time.Duration `json:"elapsed_ns"`
	Drain   time.Duration `json:"drain_ns"` // waits still running at the end of the window took this long to finish

	Acquisitions int64   `json:"acquisitions"`
	Handoffs     int64   `json:"handoffs"`
	Overlaps     int64   `json:"overlaps"`
	AcquireErrs  int64   `json:"acquire_errors"`
	UnlockErrs   int64   `json:"unlock_errors"`
	FirstError   string  `json:"first_error,omitempty"`
	LateErrs     int64   `json:"late_errors"` // waits begun in the window that failed after it (a starved waiter's budget ran out)
	WaitP50      float64 `json:"wait_p50_ms"`
	WaitP99      float64 `json:"wait_p99_ms"`
	WaitMax      float64 `json:"wait_max_ms"`
	Jain         float64 `json:"jain"`

	Commands    int64            `json:"redis_commands"`
	CommandMix  map[string]int64 `json:"redis_command_mix,omitempty"`
	Mallocs     uint64           `json:"mallocs"`
	ClientCPU   time.Duration    `json:"client_cpu_ns"`
	ServerCPU   time.Duration    `json:"server_cpu_ns"`
	Goroutines  int              `json:"goroutines_delta"`            // holds: goroutines while holding, over those before opening
	Held        int              `json:"held,omitempty"`              // holds: locks held through the window
	Lost        int              `json:"lost,omitempty"`              // holds: locks reported lost during the window
	ScriptCalls int64            `json:"script_calls,omitempty"`      // EVALSHA + EVAL + FCALL
	RoundTrips  int64            `json:"renew_round_trips,omitempty"` // holds: dlock's renewal pipelines; others: = script calls

	RedisKeyBytes int64   `json:"redis_key_bytes,omitempty"`     // MEMORY USAGE over every key (holds: while holding; contended: at the window's end)
	HeapPerHold   float64 `json:"heap_bytes_per_hold,omitempty"` // holds: Go heap while holding over before, per lock
	Ticks         float64 `json:"renewal_ticks,omitempty"`       // holds: renewal intervals in the window
	LossSeen      int     `json:"loss_seen,omitempty"`           // holds: locks that reported the loss after FLUSHALL
	LossP50       float64 `json:"loss_signal_p50_ms,omitempty"`  // holds: FLUSHALL to the holder's loss report
	LossMax       float64 `json:"loss_signal_max_ms,omitempty"`
}

func (r Measurement) seconds() float64 { return r.Elapsed.Seconds() }

// AcqPerSec is acquisitions per second of the window.
func (r Measurement) AcqPerSec() float64 { return float64(r.Acquisitions) / r.seconds() }

// HandoffsPerSec is handoffs per second of the window.
func (r Measurement) HandoffsPerSec() float64 { return float64(r.Handoffs) / r.seconds() }

// per divides by the acquisitions (0 when there were none).
func (r Measurement) per(x float64) float64 {
	if r.Acquisitions == 0 {
		return 0
	}
	return x / float64(r.Acquisitions)
}

// Row is one library in one scenario: its runs and their medians.
type Row struct {
	Lib     string        `json:"lib"`
	Variant string        `json:"variant"`
	Setting string        `json:"setting"`
	Client  string        `json:"client"`
	Floor   bool          `json:"floor,omitempty"`
	Runs    []Measurement `json:"runs"`

	Median Summary `json:"median"`
	// Overlaps and failures are summed over the runs, not medians. Failures
	// are failed acquisitions (also those that began in the window and ran
	// out of wait after it) and failed releases.
	Overlaps int64 `json:"overlaps_total"`
	Failures int64 `json:"failures_total"`
	// VsDlock is this row's headline throughput over dlock's first row's
	// (handoffs/s under contention, acquisitions/s otherwise).
	VsDlock float64 `json:"vs_dlock,omitempty"`
	// VsFloor is acquisitions/s over the floor of the same client library
	// (uncontended only).
	VsFloor float64 `json:"vs_floor,omitempty"`
}

// Summary is the medians of a row's runs.
type Summary struct {
	AcqPerSec       float64 `json:"acq_per_sec"`
	HandoffsPerSec  float64 `json:"handoffs_per_sec"`
	WaitP50         float64 `json:"wait_p50_ms"`
	WaitP99         float64 `json:"wait_p99_ms"`
	WaitMax         float64 `json:"wait_max_ms"`
	Jain            float64 `json:"jain"`
	CmdsPerAcq      float64 `json:"redis_cmds_per_acq"`
	AllocsPerAcq    float64 `json:"allocs_per_acq"`
	ClientCPUPerAcq float64 `json:"client_cpu_us_per_acq"`
	ServerCPUPerAcq float64 `json:"server_cpu_us_per_acq"`
	// holds
	Held         float64 `json:"held,omitempty"`
	Lost         float64 `json:"lost,omitempty"`
	CmdsPerSec   float64 `json:"redis_cmds_per_sec,omitempty"`
	CallsPerSec  float64 `json:"script_calls_per_sec,omitempty"`
	TripsPerSec  float64 `json:"round_trips_per_sec,omitempty"`
	ClientCPUms  float64 `json:"client_cpu_ms_per_sec,omitempty"`
	ServerCPUms  float64 `json:"server_cpu_ms_per_sec,omitempty"`
	AllocsPerSec float64 `json:"allocs_per_sec,omitempty"`
	Goroutines   float64 `json:"goroutines,omitempty"`
	TripsPerTick float64 `json:"round_trips_per_tick,omitempty"`
	HeapPerHold  float64 `json:"heap_bytes_per_hold,omitempty"`
	RedisPerKey  float64 `json:"redis_bytes_per_hold,omitempty"`
	RedisBytes   float64 `json:"redis_key_bytes,omitempty"`
	LossSeen     float64 `json:"loss_seen,omitempty"`
	LossP50      float64 `json:"loss_signal_p50_ms,omitempty"`
	LossMax      float64 `json:"loss_signal_max_ms,omitempty"`
}

func newRow(e libs.Entry) *Row {
	return &Row{Lib: e.Lib, Variant: e.Variant, Setting: e.Setting, Client: e.Client, Floor: e.Floor}
}

func (r *Row) label() string { return r.Lib + " " + r.Variant }

// summarise fills the medians and totals from the runs.
func (r *Row) summarise() {
	med := func(f func(Measurement) float64) float64 {
		xs := make([]float64, len(r.Runs))
		for i, run := range r.Runs {
			xs[i] = f(run)
		}
		return measure.Median(xs)
	}
	r.Overlaps, r.Failures = 0, 0
	for _, run := range r.Runs {
		r.Overlaps += run.Overlaps
		r.Failures += run.AcquireErrs + run.LateErrs + run.UnlockErrs
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	r.Median = Summary{
		AcqPerSec:       med(Measurement.AcqPerSec),
		HandoffsPerSec:  med(Measurement.HandoffsPerSec),
		WaitP50:         med(func(x Measurement) float64 { return x.WaitP50 }),
		WaitP99:         med(func(x Measurement) float64 { return x.WaitP99 }),
		WaitMax:         med(func(x Measurement) float64 { return x.WaitMax }),
		Jain:            med(func(x Measurement) float64 { return x.Jain }),
		CmdsPerAcq:      med(func(x Measurement) float64 { return x.per(float64(x.Commands)) }),
		AllocsPerAcq:    med(func(x Measurement) float64 { return x.per(float64(x.Mallocs)) }),
		ClientCPUPerAcq: med(func(x Measurement) float64 { return x.per(us(x.ClientCPU)) }),
		ServerCPUPerAcq: med(func(x Measurement) float64 { return x.per(us(x.ServerCPU)) }),
		Held:            med(func(x Measurement) float64 { return float64(x.Held) }),
		Lost:            med(func(x Measurement) float64 { return float64(x.Lost) }),
		CmdsPerSec:      med(func(x Measurement) float64 { return float64(x.Commands) / x.seconds() }),
		CallsPerSec:     med(func(x Measurement) float64 { return float64(x.ScriptCalls) / x.seconds() }),
		TripsPerSec:     med(func(x Measurement) float64 { return float64(x.RoundTrips) / x.seconds() }),
		ClientCPUms:     med(func(x Measurement) float64 { return ms(x.ClientCPU) / x.seconds() }),
		ServerCPUms:     med(func(x Measurement) float64 { return ms(x.ServerCPU) / x.seconds() }),
		AllocsPerSec:    med(func(x Measurement) float64 { return float64(x.Mallocs) / x.seconds() }),
		Goroutines:      med(func(x Measurement) float64 { return float64(x.Goroutines) }),
		TripsPerTick: med(func(x Measurement) float64 {
			if x.Ticks == 0 {
				return 0
			}
			return float64(x.RoundTrips) / x.Ticks
		}),
		HeapPerHold: med(func(x Measurement) float64 { return x.HeapPerHold }),
		RedisPerKey: med(func(x Measurement) float64 {
			if x.Held == 0 {
				return 0
			}
			return float64(x.RedisKeyBytes) / float64(x.Held)
		}),
		RedisBytes: med(func(x Measurement) float64 { return float64(x.RedisKeyBytes) }),
		LossSeen:   med(func(x Measurement) float64 { return float64(x.LossSeen) }),
		LossP50:    med(func(x Measurement) float64 { return x.LossP50 }),
		LossMax:    med(func(x Measurement) float64 { return x.LossMax }),
	}
}

// Table is one scenario's rows.
type Table struct {
	ID      string `json:"id"`
	Title   string `json:"title"`
	Note    string `json:"note,omitempty"`
	Holds   bool   `json:"holds,omitempty"`
	Fresh   bool   `json:"fresh,omitempty"` // a new name per acquisition: shown like the uncontended table
	Workers int    `json:"workers"`
	Clients int    `json:"clients"`
	Rows    []*Row `json:"rows"`
	// RoundRatios: our row over the best peer of each round, per service.
	RoundRatios []RoundRatio `json:"round_ratios,omitempty"`
}

// Report is a whole benchmark run.
type Report struct {
	Machine Machine  `json:"machine"`
	Config  Config   `json:"config"`
	Started string   `json:"started"`
	Tables  []*Table `json:"tables"`
}

// ratios fills VsDlock and VsFloor.
func (t *Table) ratios() {
	headline := func(r *Row) float64 {
		if t.Workers > 1 && !t.Holds {
			return r.Median.HandoffsPerSec
		}
		return r.Median.AcqPerSec
	}
	var base *Row
	floors := map[string]*Row{}
	for _, r := range t.Rows {
		if r.Lib == "dlock" && base == nil {
			base = r
		}
		if r.Floor {
			floors[r.Client] = r
		}
	}
	t.RoundRatios = t.roundRatios()
	for _, r := range t.Rows {
		if base != nil && headline(base) > 0 && !t.Holds {
			r.VsDlock = headline(r) / headline(base)
		}
		if f := floors[r.Client]; f != nil && f.Median.AcqPerSec > 0 {
			r.VsFloor = r.Median.AcqPerSec / f.Median.AcqPerSec
		}
	}
}
