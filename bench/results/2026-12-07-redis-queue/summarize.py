#!/usr/bin/env python3
"""summary.txt from the {base,head}-{1..10}.json of run.sh: per scenario, each
side's median rate, client and server CPU and allocations per acquisition,
and head/base per pair (1-5 base ran first, 6-10 head first)."""
import json, os, statistics
here = os.path.dirname(os.path.abspath(__file__))
res = {}
for v in ['base', 'head']:
    for r in range(1, 11):
        d = json.load(open(os.path.join(here, f'{v}-{r}.json')))
        for t in d['tables']:
            for row in t['rows']:
                run = row['runs'][0]
                sec = run['elapsed_ns'] / 1e9
                acq = run['acquisitions']
                rate = (acq if run['handoffs'] == 0 else run['handoffs']) / sec
                res.setdefault(t['id'], {}).setdefault(v, []).append(
                    (rate, run['client_cpu_ns'] / 1e3 / acq, run['server_cpu_ns'] / 1e3 / acq,
                     run['mallocs'] / acq, run['overlaps'], run['acquire_errors']))
med = statistics.median
for sc, vv in res.items():
    print(sc)
    for v in ['base', 'head']:
        rows = vv[v]
        print(f"  {v}: rate median {med(x[0] for x in rows):.0f} (range {min(x[0] for x in rows):.0f}-{max(x[0] for x in rows):.0f});"
              f" client µs/acq median {med(x[1] for x in rows):.1f}; server µs/acq {med(x[2] for x in rows):.1f};"
              f" allocs/acq {med(x[3] for x in rows):.1f}; overlaps {sum(x[4] for x in rows)} errors {sum(x[5] for x in rows)}")
    ratios = [h[0] / b[0] for b, h in zip(vv['base'], vv['head'])]
    print("  head/base per pair, base first (1-5): " + ' '.join(f'{x:.2f}' for x in ratios[:5]) +
          "; head first (6-10): " + ' '.join(f'{x:.2f}' for x in ratios[5:]) + f"; median of 10 {med(ratios):.2f}")
    cr = [h[1] / b[1] for b, h in zip(vv['base'], vv['head'])]
    print(f"  client CPU per acquisition head/base: median {med(cr):.2f} (range {min(cr):.2f}-{max(cr):.2f})")
