#!/usr/bin/env bash
# Coalescing independent flows changes no result: the engine benchmark's exhaustive ring all-reduce
# (one rank per node on one non-blocking switch) with and without it, to the last printed bit
# (17 digits) of the step time, and the same flows. Usage: coalesce_exact.sh build/exasim_bench_engine
set -euo pipefail
exe="$1"
fail=0
for case in "2 67108864" "3 1000" "64 67108864" "257 12345679"; do
  set -- $case
  a=$("$exe" allreduce "$1" exhaustive "$2")
  b=$("$exe" allreduce "$1" exhaustive "$2" uncoalesced)
  pick() { python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(repr(d["step_time_s"]), d["flows"], d["coalesced_flows"])' "$1"; }
  read -r ta fa ca <<<"$(pick "$a")"
  read -r tb fb cb <<<"$(pick "$b")"
  echo "ranks $1 bytes $2: coalesced $ta s ($fa flows, $ca coalesced), uncoalesced $tb s ($fb flows, $cb coalesced)"
  if [[ "$ta" != "$tb" || "$fa" != "$fb" || "$cb" != 0 ]]; then echo "MISMATCH"; fail=1; fi
  if (( $1 > 2 )) && (( ca == 0 )); then echo "nothing coalesced"; fail=1; fi
done
exit $fail
