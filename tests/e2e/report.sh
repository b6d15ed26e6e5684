#!/usr/bin/env bash
# End-to-end: `exasim report` writes one self-contained HTML page for a real small run (and for a
# folder that also holds a sweep's results and a validation), which loads nothing from the network
# and which headless Chromium renders into a screenshot that is not blank.
# Usage: report.sh <exasim> <source dir>
set -euo pipefail
exe=$1; src=$2
data=$src/tests/data/plot
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

browser=
for b in chromium chromium-browser; do
  command -v "$b" > /dev/null 2>&1 && { browser=$b; break; }
done
[ -n "$browser" ] || fail "no chromium or chromium-browser on the PATH (Debian: chromium, installed by tools/setup)"
py=
for p in "${EXASIM_PYTHON:-}" python3 /usr/bin/python3; do
  [ -n "$p" ] && "$p" -c 'import matplotlib' 2>/dev/null && { py=$p; break; }
done
[ -n "$py" ] || fail "no python3 with matplotlib (Debian: python3-matplotlib, installed by tools/setup)"

"$exe" run moda-1024 --out "$tmp/run" > /dev/null
"$exe" report "$tmp/run" --out "$tmp/report.html" > /dev/null
[ -s "$tmp/report.html" ] || fail "no report.html"
for want in moda-1024 "step time" "sustained PFLOPS" "model PFLOPS" "tokens/s" "memory per device" \
            "Where the step time goes" "Critical path" "data:image/png;base64,"; do
  grep -q "$want" "$tmp/report.html" || fail "report.html lacks '$want'"
done
# Self-contained: nothing to fetch (no http(s) URL at all, no src/href other than inline data).
! grep -q -E "https?://" "$tmp/report.html" || fail "report.html refers to the network: $(grep -o -E 'https?://[^"]*' "$tmp/report.html" | head -3)"
! grep -q -E "(src|href)=\"[^d#]" "$tmp/report.html" || fail "report.html loads a file: $(grep -o -E '(src|href)="[^d#][^"]*' "$tmp/report.html" | head -3)"

# Headless Chromium renders it; the screenshot has many distinct colours (not a blank page).
(cd "$tmp" && timeout 60 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
  --screenshot="$tmp/shot.png" --window-size=1200,2000 "file://$tmp/report.html" > "$tmp/chromium.log" 2>&1) \
  || fail "$browser --headless failed: $(tail -5 "$tmp/chromium.log")"
[ -s "$tmp/shot.png" ] || fail "no screenshot: $(tail -5 "$tmp/chromium.log")"
"$py" - "$tmp/shot.png" <<'PY' || fail "the screenshot looks blank"
import sys
import matplotlib.image as mpimg
img = mpimg.imread(sys.argv[1])
flat = img.reshape(-1, img.shape[-1])
colours = len({tuple(p) for p in flat[:: max(1, len(flat) // 200000)].tolist()})
print(f"  screenshot {img.shape[1]}x{img.shape[0]}: {colours} colours")
assert colours > 200, colours
PY

# A folder with a sweep's results and a validation as well: the heatmap and the validation table.
cp "$data/sweep/results.jsonl" "$data/validation.json" "$tmp/run/"
"$exe" report "$tmp/run" --out "$tmp/full.html" > /dev/null
for want in "Sweep: fixture-gpt-1024" "strategies heatmap" "Validation against published measurements" \
            "not expressible"; do
  grep -q "$want" "$tmp/full.html" || fail "full.html lacks '$want'"
done
[ "$(grep -o "data:image/png;base64," "$tmp/full.html" | wc -l)" -eq 3 ] || fail "full.html should inline 3 images"
! grep -q -E "https?://" "$tmp/full.html" || fail "full.html refers to the network"

# Bad input: exit 2, a message naming the folder, nothing written.
set +e
"$exe" report "$tmp/no-such-run" --out "$tmp/bad.html" 2> "$tmp/err.txt"; rc=$?
set -e
[ "$rc" -eq 2 ] || fail "report of a missing folder exited $rc, expected 2"
grep -q "no-such-run" "$tmp/err.txt" || fail "message does not name the folder: $(cat "$tmp/err.txt")"
[ ! -e "$tmp/bad.html" ] || fail "bad.html written for a missing folder"
echo '{"step_time_s": 1}' > "$tmp/run/report.json"
set +e
"$exe" report "$tmp/run" --out "$tmp/bad.html" 2> "$tmp/err.txt"; rc=$?
set -e
[ "$rc" -eq 2 ] || fail "report of a bad report.json exited $rc, expected 2"
grep -q "report.json: not a report.json" "$tmp/err.txt" || fail "message: $(cat "$tmp/err.txt")"
[ ! -e "$tmp/bad.html" ] || fail "bad.html written for a bad report.json"
[ -z "$(find "$tmp" -maxdepth 1 -name '.bad.html.*')" ] || fail "a temporary file was left behind"
echo "e2e report: ok"
