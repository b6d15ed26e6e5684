#!/usr/bin/env bash
# End-to-end: moda-1024 (1,024 nodes, 4 supernodes, direct all-to-all and ParO) simulated both
# ways: every rank and flow (exhaustive) and one representative per class (folded). The two
# step times agree within 2 %. The exhaustive run takes about 40 s on a 2-core machine (its
# wall time is a benchmark figure: tools/bench --exhaustive).
# Usage: fold1024.sh <exasim> <source dir>
set -euo pipefail
exe=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$exe" run moda-1024 --out "$tmp/f" > /dev/null
"$exe" run moda-1024 --fidelity exhaustive --out "$tmp/x" > /dev/null
python3 - "$tmp/f/report.json" "$tmp/x/report.json" <<'PY'
import json, sys
f, x = (json.load(open(p)) for p in sys.argv[1:3])
assert f["sim"]["fidelity"] == "folded" and x["sim"]["fidelity"] == "exhaustive"
assert x["sim"]["simulated_ranks"] == 1024 and f["sim"]["simulated_ranks"] < 1024, (f["sim"], x["sim"])
gap = f["step_time_s"] / x["step_time_s"] - 1
print(f"moda-1024: folded {f['step_time_s']:.6g} s, exhaustive {x['step_time_s']:.6g} s "
      f"({x['sim']['flows']} flows), gap {100 * gap:+.2f} %")
assert abs(gap) <= 0.02, gap
PY
