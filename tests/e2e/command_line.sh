#!/usr/bin/env bash
# End-to-end: the command line itself (CLI11): --version, help, each subcommand's own --help with an
# example, and bad command lines refused with exit 2 and a message naming the bad flag or word.
# Usage: command_line.sh <exasim> <source dir>
set -euo pipefail
exe=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# --version: one line naming the program and the project's version (CMakeLists.txt's project()).
version=$(sed -n 's/^project(exasim VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
[ -n "$version" ] || fail "no version in CMakeLists.txt's project()"
[ "$("$exe" --version)" = "exasim $version" ] || fail "--version printed '$("$exe" --version)'"

# help and --help: every subcommand listed, exit 0.
"$exe" help > "$tmp/help.txt" || fail "exasim help exited $?"
"$exe" --help > "$tmp/help2.txt" || fail "exasim --help exited $?"
cmp -s "$tmp/help.txt" "$tmp/help2.txt" || fail "exasim help and exasim --help differ"
for sub in run validate calibrate sweep list check plot report help; do
  grep -q "^  $sub " "$tmp/help.txt" || fail "exasim help does not list $sub"
  "$exe" "$sub" --help > "$tmp/$sub.txt" || fail "exasim $sub --help exited $?"
  grep -q "^Usage: exasim $sub" "$tmp/$sub.txt" || fail "exasim $sub --help: no usage line: $(head -3 "$tmp/$sub.txt")"
  grep -q "^  exasim $sub" "$tmp/$sub.txt" || fail "exasim $sub --help: no example"
done
# A subcommand's help shows its own options only.
for f in --out --fidelity --profile --sample --cache --analytic --trace --max-graph-ops; do
  grep -q -- "^  $f " "$tmp/run.txt" || fail "run --help lacks $f"
done
for f in --jobs --resume --simulate-top --quick --threads --json; do
  ! grep -q -- "$f" "$tmp/run.txt" || fail "run --help shows $f, not one of run's options"
done
for f in --jobs --resume --simulate-top --analytic --max-graph-ops; do
  grep -q -- "^  $f " "$tmp/sweep.txt" || fail "sweep --help lacks $f"
done
! grep -q -- "--fidelity\|--trace" "$tmp/sweep.txt" || fail "sweep --help shows run's options"
"$exe" help run > "$tmp/help-run.txt"
cmp -s "$tmp/help-run.txt" "$tmp/run.txt" || fail "exasim help run differs from exasim run --help"

# Bad command lines: exit 2, the bad word named, nothing written.
refused() {  # PATTERN ARGS...
  local pattern=$1; shift
  local rc=0
  (cd "$tmp" && "$exe" "$@") > "$tmp/out.txt" 2> "$tmp/err.txt" || rc=$?
  [ "$rc" -eq 2 ] || fail "exasim $*: exited $rc, expected 2"
  grep -q -- "$pattern" "$tmp/err.txt" || fail "exasim $*: message lacks '$pattern': $(cat "$tmp/err.txt")"
  [ ! -e "$tmp/out" ] || fail "exasim $*: wrote out/"
}
refused "Usage: exasim"
refused "no subcommand 'bogus'" bogus
refused "bogus" list bogus
refused "empty argument" run ''
refused "\-\-bogus" run --bogus
refused "\-\-out" run --out
refused "two.json" run one.json two.json
refused "\-\-fidelity" run --fidelity sideways
refused "\-\-max-graph-ops" run --max-graph-ops -3
refused "\-\-analytic excludes \-\-simulate-top" sweep "$src/scenarios/sweeps/tensor3d-batch.json" --analytic --simulate-top 3
refused "sweep_file is required" sweep
refused "\-\-jobs" sweep "$src/scenarios/sweeps/tensor3d-batch.json" --jobs 0
refused "\-\-threads" calibrate --threads 0 --out "$tmp/out/host.json"
refused "extra" validate extra
refused "no subcommand 'bogus'" help bogus
refused "files is required" check

# check: the parser alone, one line per file; exit 2 when any is refused, each refusal with its
# file and JSON path.
"$exe" check "$src/scenarios/moda-1024.json" "$src/scenarios/sweeps/tensor3d-batch.json" > "$tmp/check.txt" \
  || fail "exasim check of two shipped files exited $?"
[ "$(grep -c ': ok$' "$tmp/check.txt")" = 2 ] || fail "exasim check: $(cat "$tmp/check.txt")"
rc=0; "$exe" check "$src/scenarios/moda-1024.json" "$src/tests/data/hardening/plan-devices-overflow.json" \
  > "$tmp/check.txt" || rc=$?
[ "$rc" = 2 ] || fail "exasim check of a bad file exited $rc, expected 2"
grep -q "moda-1024.json: ok$" "$tmp/check.txt" || fail "exasim check: the good file: $(cat "$tmp/check.txt")"
grep -q "plan-devices-overflow.json: refused: .*plan-devices-overflow.json: /plan: expected at most" "$tmp/check.txt" \
  || fail "exasim check: the bad file's line: $(cat "$tmp/check.txt")"

# plot and report hand every argument after the subcommand, in order, to tools/exasim_plot.
printf '#!/bin/sh\nshift 2\nprintf "%%s|" "$@"\n' > "$tmp/py"
chmod +x "$tmp/py"
[ "$(EXASIM_PYTHON="$tmp/py" "$exe" plot --out x.png breakdown a.json --x=3 -- --help)" = "plot|--out|x.png|breakdown|a.json|--x=3|--|--help|" ] \
  || fail "plot did not pass its arguments on in order: $(EXASIM_PYTHON="$tmp/py" "$exe" plot --out x.png breakdown a.json --x=3 -- --help)"
[ "$(EXASIM_PYTHON="$tmp/py" "$exe" report dir --out r.html)" = "report|dir|--out|r.html|" ] || fail "report's arguments"
echo "e2e command_line: ok"
