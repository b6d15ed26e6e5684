"""Reading reports, sweep rows and validation rows; bad input raises InputError (exit 2)."""

import csv
import json
import math
import os


class InputError(Exception):
    """Bad input: exit status 2."""


def fail(msg):
    raise InputError(msg)

def read_json(path, what):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        fail(f"{path}: no such file (expected {what})")
    except IsADirectoryError:
        fail(f"{path}: is a folder (expected {what})")
    except json.JSONDecodeError as e:
        fail(f"{path}: not JSON ({e}); expected {what}")
    except (OSError, UnicodeDecodeError) as e:
        fail(f"{path}: cannot read it ({e}); expected {what}")


def unwrap(v):
    """Scenario values may be {"value": ..., "assumption": ...}."""
    while isinstance(v, dict) and "value" in v:
        v = v["value"]
    return v


_MISSING = object()


def lookup(doc, name):
    """A JSON pointer ("/plan/nodes") or a top-level key ("sustained_pflops"); _MISSING if absent."""
    if not name.startswith("/"):
        return unwrap(doc[name]) if isinstance(doc, dict) and name in doc else _MISSING
    cur = doc
    for part in name[1:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        cur = unwrap(cur)
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return _MISSING
    return unwrap(cur)


def as_number(v, where, what):
    if isinstance(v, bool) or v is None or v is _MISSING:
        fail(f"{where}: expected a number for {what}, got {json.dumps(None if v is _MISSING else v)}")
    try:
        x = float(v)
    except (TypeError, ValueError):
        fail(f"{where}: expected a number for {what}, got {json.dumps(v)}")
    if not math.isfinite(x):
        fail(f"{where}: expected a finite number for {what}, got {v}")
    return x


def load_report(path):
    if os.path.isdir(path):
        path = os.path.join(path, "report.json")
    r = read_json(path, "a report.json written by `exasim run`")
    if not isinstance(r, dict) or "step_time_s" not in r or "breakdown" not in r:
        fail(f"{path}: not a report.json of `exasim run` (expected an object with \"step_time_s\" and \"breakdown\")")
    r["_path"] = path
    return r


def report_name(r):
    s = r.get("scenario")
    if isinstance(s, dict):
        return s.get("name") or os.path.basename(os.path.dirname(r["_path"]))
    return s if isinstance(s, str) else os.path.basename(os.path.dirname(r["_path"]))


def report_count(r):
    """(count, "nodes" | "devices") of a report."""
    plan = r.get("plan") or {}
    for key in ("nodes", "devices"):
        v = unwrap(plan.get(key))
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v), key
    v = lookup(r, "/sim/represented_ranks")
    if v is not _MISSING:
        return as_number(v, r["_path"], "/sim/represented_ranks"), "devices"
    fail(f"{r['_path']}: no node or device count (expected /plan/nodes or /plan/devices)")


def report_memory(r):
    """The memory-per-device object (renamed from memory_per_node_bytes)."""
    for key in ("memory_per_device_bytes", "memory_per_node_bytes"):
        if isinstance(r.get(key), dict):
            return r[key]
    return None


def parse_cell(s):
    if s is None:
        return None
    s = s.strip()
    if s == "" or s.lower() in ("null", "none", "nan"):
        return None
    if s.lower() in ("true", "false"):
        return s.lower() == "true"
    for conv in (int, float):
        try:
            return conv(s)
        except ValueError:
            pass
    return s


def load_rows(path):
    """Rows of a sweep's results.jsonl, results.csv (or a JSON array of objects)."""
    if os.path.isdir(path):
        for name in ("results.jsonl", "results.csv"):
            if os.path.exists(os.path.join(path, name)):
                path = os.path.join(path, name)
                break
        else:
            fail(f"{path}: no results.jsonl or results.csv in this folder (expected a sweep's output)")
    ext = os.path.splitext(path)[1].lower()
    what = "a sweep's results.jsonl (one JSON object per line)"
    rows = []
    if ext == ".jsonl":
        try:
            with open(path, encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError as e:
                        fail(f"{path}:{n}: not JSON ({e}); expected {what}")
                    if not isinstance(row, dict):
                        fail(f"{path}:{n}: expected a JSON object per line")
                    rows.append(row)
        except FileNotFoundError:
            fail(f"{path}: no such file (expected {what})")
        except (OSError, UnicodeDecodeError) as e:
            fail(f"{path}: cannot read it ({e}); expected {what}")
    elif ext == ".csv":
        try:
            with open(path, encoding="utf-8", newline="") as f:
                reader = csv.DictReader(f)
                if not reader.fieldnames:
                    fail(f"{path}: empty (expected a sweep's results.csv with a header row)")
                rows = [{k: parse_cell(v) for k, v in row.items() if k is not None} for row in reader]
        except FileNotFoundError:
            fail(f"{path}: no such file (expected a sweep's results.csv)")
        except (OSError, UnicodeDecodeError, csv.Error) as e:
            fail(f"{path}: cannot read it ({e}); expected a sweep's results.csv")
    elif ext == ".json":
        data = read_json(path, "a JSON array of result rows")
        if isinstance(data, dict) and isinstance(data.get("results"), list):
            data = data["results"]
        if not isinstance(data, list) or not all(isinstance(x, dict) for x in data):
            fail(f"{path}: expected a JSON array of result rows (objects)")
        rows = data
    else:
        fail(f"{path}: expected a sweep's results.jsonl or results.csv (by its extension)")
    if not rows:
        fail(f"{path}: no rows (expected a sweep's results, one row per plan)")
    return rows, path


def columns_of(rows):
    cols = []
    seen = set()
    for r in rows:
        for k in r:
            if k not in seen:
                seen.add(k)
                cols.append(k)
    return cols


def column(rows, name, path, what="column"):
    cols = columns_of(rows)
    if name in cols:
        return name
    alt = name if name.startswith("/") else "/" + name
    if alt in cols:
        return alt
    tail = [c for c in cols if c.endswith("/" + name.lstrip("/"))]
    if len(tail) == 1:
        return tail[0]
    shown = ", ".join(cols[:30]) + (" ..." if len(cols) > 30 else "")
    if len(tail) > 1:
        fail(f"{path}: {what} \"{name}\" is ambiguous ({', '.join(tail)})")
    fail(f"{path}: no {what} \"{name}\" (its columns: {shown})")


def status_of(row, status_col):
    s = row.get(status_col)
    return str(s).strip().lower() if s is not None else ""


def dimension_columns(rows):
    """The swept dimensions: JSON-pointer columns, in the order of the first row; varying first."""
    dims = [c for c in columns_of(rows) if c.startswith("/")]
    varying = [c for c in dims if len({json.dumps(r.get(c), sort_keys=True) for r in rows}) > 1]
    return varying + [c for c in dims if c not in varying]


def ok_rows(rows, path, status_col):
    if not any(status_col in r for r in rows):
        fail(f"{path}: no column \"{status_col}\" (expected each row's status: ok, invalid, infeasible or error)")
    ok = [r for r in rows if status_of(r, status_col) == "ok"]
    if not ok:
        counts = {}
        for r in rows:
            counts[status_of(r, status_col)] = counts.get(status_of(r, status_col), 0) + 1
        shown = ", ".join(f"{v} {k or '(none)'}" for k, v in sorted(counts.items()))
        fail(f"{path}: no row with status \"ok\" ({shown}); expected at least one plan that ran")
    return ok

def sweep_meta(results_path):
    """The sweep.json that `exasim sweep` writes beside its results ({} when there is none)."""
    meta_path = os.path.join(os.path.dirname(os.path.abspath(results_path)), "sweep.json")
    if not os.path.exists(meta_path):
        return {}
    meta = read_json(meta_path, "a sweep's sweep.json (written by exasim sweep)")
    return meta if isinstance(meta, dict) else {}

def sweep_name(rows, path):
    name = sweep_meta(path).get("name")
    if isinstance(name, str) and name:
        return name
    for key in ("sweep", "base"):
        if rows and isinstance(rows[0].get(key), str):
            return rows[0][key]
    return os.path.basename(os.path.dirname(os.path.abspath(path))) or os.path.basename(path)
