"""Reliability figures: run the fault suite (tests/fault) and print every figure it reports as a Markdown table.

    python bench/reliability.py            # the fast subset (what CI runs), ~3 minutes on 2 shared cores
    python bench/reliability.py --full     # the full runs (MNEMO_FULL=1): 5,000 remembers with 55 kills, ...
    python bench/reliability.py -k soak    # only some tests (pytest -k)
    python bench/reliability.py --out figures.md --json figures.json
    python bench/reliability.py -k salvage  # only the repair-salvage section (10,000 memories, three offsets)
    python bench/reliability.py --no-conflicts   # skip the conflict-decision section (real model, ~30 s)

The repair-salvage section (tests/fault/test_repair_salvage.py) damages 64 KiB of a store of --salvage-size
memories (default 10,000; the test alone defaults to 1,500) at three offsets, repairs it, and prints recovered/total
per offset and how many ids the report listed as lost (it must list exactly the unrecovered ones).

Each test reports its figures with `figure(...)` (tests/fault/_helpers.py); they are collected through the file
named by MNEMO_FIGURES. The table lists test, figure, value, details, and the command to reproduce one test.
A second section gives the precision and recall of the conflict decision on write (bench/conflict_decision.py
--test: the labeled pairs in bench/data/conflict_pairs.jsonl, the shipped model on its tune split, each tune round
held out, and the held-out test split). Exit status: pytest's.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def machine() -> str:
    cores = os.cpu_count()
    mem = ""
    try:
        kb = int(next(line for line in open("/proc/meminfo") if line.startswith("MemTotal")).split()[1])
        mem = f", {kb / 1024 / 1024:.0f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    return f"{platform.system()} {platform.release()}, {cores} cores{mem}, Python {platform.python_version()}"


def salvage_section(rows: list[dict]) -> list[str]:
    """Repair salvage: recovered/total per damaged offset and the ids listed as lost."""
    runs = [r for r in rows if r["test"] == "test_repair_salvage[offsets]"]
    if not runs:
        return []
    out = ["", f"Repair salvage ({runs[0].get('size', '?'):,} memories, 64 KiB overwritten, "
           "`mnemo doctor --repair`):", "", "| damage at | recovered / total | listed as lost | from the damaged "
           "file / only in the backup | vectors re-embedded | repair time |", "|---|---|---|---|---|---|"]
    for r in runs:
        where = r["name"].split(" (byte")[0].replace("64 KiB overwritten at ", "")
        got, total = (int(x) for x in str(r["value"]).split("/"))
        out.append(f"| {where} | {r['value']} ({100 * got / total:.2f} %) | {r['listed_lost']} | "
                   f"{r['from_damaged_file']} / {r['from_backup_only']} | {r['reembedded']} | {r['seconds']} s |")
    return out
def conflict_section(rows: list[dict]) -> str:
    """Precision/recall of the conflict decision (bench/conflict_decision.py); its figures join `rows`."""
    sys.path.insert(0, str(REPO / "bench"))
    import conflict_decision

    res = conflict_decision.run(test=True)
    for split in ("tune", "tune_cv", "test"):
        c = res[split]["conflict"]
        rows.append({"test": "bench/conflict_decision.py", "name": f"conflict decision ({res[split]['split']})",
                     "value": f"P {c['precision']:.3f} / R {c['recall']:.3f}", "pairs": res[split]["pairs"]})
    return (conflict_decision.table(res) + f"\n\nThe test split is round {', '.join(map(str, res['test_rounds']))}, written and committed "
            "before it was first scored (docs/reliability.md has the earlier test rounds). Reproduce: "
            "`python bench/conflict_decision.py --test --errors`.")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--full", action="store_true", help="the long runs too (MNEMO_FULL=1)")
    ap.add_argument("-k", dest="keyword", help="only tests matching this pytest -k expression")
    ap.add_argument("--out", type=Path, help="also write the Markdown table here")
    ap.add_argument("--json", type=Path, help="also write the raw figures (JSON lines) here")
    ap.add_argument("--salvage-size", type=int, default=10000,
                    help="memories in the store the repair-salvage section damages (default 10,000)")
    ap.add_argument("--no-conflicts", action="store_true", help="skip the conflict-decision section")
    args = ap.parse_args()

    with tempfile.NamedTemporaryFile("w+", suffix=".jsonl", delete=False) as tmp:
        figures_path = Path(tmp.name)
    env = dict(os.environ, MNEMO_FIGURES=str(figures_path), HF_HUB_OFFLINE="1", ANONYMIZED_TELEMETRY="False",
               MNEMO_SALVAGE_SIZE=str(args.salvage_size))
    if args.full:
        env["MNEMO_FULL"] = "1"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/fault", "--durations=0"]
    if args.keyword:
        cmd += ["-k", args.keyword]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    took = time.monotonic() - t0
    rows = [json.loads(line) for line in figures_path.read_text().splitlines() if line.strip()]
    figures_path.unlink(missing_ok=True)

    prefix = "MNEMO_FULL=1 " if args.full else ""
    lines = [f"Machine: {machine()}. Run: `{prefix}python bench/reliability.py"
             + (f" -k {args.keyword}" if args.keyword else "") + f"` ({took:.0f} s, pytest exit {proc.returncode}).",
             "", "| test | figure | value | details |", "|---|---|---|---|"]
    for r in rows:
        extra = {k: v for k, v in r.items() if k not in ("test", "name", "value", "unit", "full")}
        details = ", ".join(f"{k}={v}" for k, v in extra.items())
        value = f"{r['value']}{(' ' + r['unit']) if r.get('unit') else ''}"
        lines.append(f"| {r['test']} | {r['name']} | {value} | {details.replace('|', '/')} |")
    lines += salvage_section(rows)
    if not args.no_conflicts:
        lines += ["", "## Conflict decision on write (issue 13, item 6)", "", conflict_section(rows)]
    table = "\n".join(lines)
    print(table)
    tail = [ln for ln in proc.stdout.splitlines() if "passed" in ln or "failed" in ln or "error" in ln.lower()]
    print("\n" + (tail[-1] if tail else proc.stdout[-2000:]))
    if proc.returncode != 0:  # the failures section (not the durations list that follows it)
        out = proc.stdout
        start = out.find("= FAILURES =")
        end = out.find("slowest durations", start) if start >= 0 else -1
        print(out[max(0, start - 80):end if end > 0 else None][-20000:] if start >= 0 else out[-6000:],
              file=sys.stderr)
    if args.out:
        args.out.write_text(table + "\n")
    if args.json:
        args.json.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
