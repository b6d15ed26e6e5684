#!/usr/bin/env bash
# End-to-end: `exasim validate --json` covers every case of published.json, the BaGuaLu ones with predictions.
set -euo pipefail
exe=$1; src=$2
out=$("$exe" validate --json 2>/dev/null)
python3 - "$out" <<'PY'
import json, sys
rows = json.loads(sys.argv[1])
bag = [r for r in rows if r["case"].startswith("bagualu")]
assert len([r for r in bag if r["unit"] == "PFLOPS"]) == 18, len(bag)
eff = [r for r in bag if r["unit"] == "percent"]
assert sorted(r["figure"] for r in eff) == ["fp32 efficiency", "mixed efficiency"], eff
for r in eff:
    assert abs(r["error_points"] - (r["predicted"] - r["published"])) < 1e-9, r
for r in rows:
    assert set(["case", "figure", "predicted", "published", "error_pct", "role"]) <= set(r), r
    assert r["role"] in ("predicted", "fitted", "not expressible"), r
for r in bag:
    assert r["role"] in ("predicted", "fitted") and r["predicted"] > 0, r
    assert abs(r["error_pct"] - 100 * (r["predicted"] - r["published"]) / r["published"]) < 1e-6
assert [r for r in bag if r["role"] == "fitted"], "the fitted case is not marked"
cases = {r["case"] for r in rows}
for c in ["tensor-parallel-3d-vs-1d-2d", "zero-memory-7.5b", "megatron-table1-1.7b", "megatron-table1-18.4b",
          "megatron-table1-145.6b", "megatron-table1-1t", "korthikanti-table5-22b", "korthikanti-table5-175b",
          "korthikanti-table5-530b", "korthikanti-table5-1t", "korthikanti-fig7-activation-memory"]:
    assert c in cases, c
# Korthikanti et al.: both modes of Table 5 predicted, selective + sequence faster than full recomputation;
# Fig. 7's shares in percent of 'none', judged in points, in the order full < seqsel < sel, seq < 100.
for m in ["22b", "175b", "530b", "1t"]:
    t5 = {r["figure"]: r for r in rows if r["case"] == "korthikanti-table5-" + m}
    assert set(t5) == {"full", "selective+sequence"}, t5
    assert 0 < t5["selective+sequence"]["predicted"] < t5["full"]["predicted"], t5
    f7 = {r["figure"].split()[1]: r for r in rows if r["case"] == "korthikanti-fig7-activation-memory" and r["figure"].startswith(m + " ")}
    assert set(f7) == {"seq", "sel", "seqsel", "full"}, f7
    for r in f7.values():
        assert r["unit"] == "percent" and abs(r["error_points"] - (r["predicted"] - r["published"])) < 1e-9, r
    assert f7["full"]["predicted"] < f7["seqsel"]["predicted"] < f7["sel"]["predicted"] < 100, f7
    assert f7["seqsel"]["predicted"] < f7["seq"]["predicted"] < 100, f7
print("e2e validate: ok,", len(rows), "rows")
PY
