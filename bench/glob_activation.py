"""Glob activation benchmark: do rules attach to the files their own tool would attach them to?

Protocol (../shared/data/README.md, "Benchmark protocol"): the rule universe is every rule of glob_rules.jsonl
from copilot_instructions, cursorrules_current, cursor_mdc_sanjeed5 and continue_rules that is not a VS Code
catch-all (380 rules); for each of the 200 real file paths of glob_cases.jsonl:
- vscode_exact: every rule matched in VS Code ``applyTo`` mode against ``abs_path``, the set compared with
  ``expected``;
- minimatch_exact: every rule matched in minimatch mode against ``path``, compared with ``expected_minimatch``.
Also reported: minimatch_dot_exact (Cursor's closest public guess) and native_exact (each rule in the mode of the
tool it was written for: copilot -> vscode, continue -> minimatch, cursor -> minimatch_dot, which is what the
product does).

The globs are NOT taken from glob_rules.jsonl: each rule file is read by Mnemo's own loaders (tolerant frontmatter
parsing included) and its parsed patterns are used, so this measures the whole path from file to activation.
Prints a summary and, last, one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from mnemo.core.skills import read_skill_file  # noqa: E402
from mnemo.core.skills.globs import MINIMATCH, MINIMATCH_DOT, VSCODE, matcher_for, split_patterns  # noqa: E402
from mnemo.core.skills.model import FORMAT_CONTINUE, FORMAT_COPILOT, FORMAT_CURSOR  # noqa: E402

CORPORA = {
    "copilot_instructions": FORMAT_COPILOT,
    "cursorrules_current": FORMAT_CURSOR,
    "cursor_mdc_sanjeed5": FORMAT_CURSOR,
    "continue_rules": FORMAT_CONTINUE,
}
NATIVE = {FORMAT_COPILOT: (VSCODE, "expected"), FORMAT_CONTINUE: (MINIMATCH, "expected_minimatch"),
          FORMAT_CURSOR: (MINIMATCH_DOT, "expected_minimatch_dot")}


def load_rules(data: Path) -> tuple[list[dict], list[str]]:
    """The 380 specific rules with globs parsed from their files by Mnemo's loaders."""
    index: dict[str, tuple[str, str]] = {}
    for corpus in CORPORA:
        for line in open(data / "skills" / f"{corpus}.jsonl", encoding="utf-8"):
            rec = json.loads(line)
            index[rec["id"]] = (corpus, rec["path"])
    rules, notes = [], []
    for line in open(data / "glob" / "glob_rules.jsonl", encoding="utf-8"):
        r = json.loads(line)
        corpus = r["id"].split(":", 1)[0]
        if corpus not in CORPORA or r["catch_all_vscode"]:
            continue
        _c, rel = index[r["id"]]
        fmt = CORPORA[corpus]
        skill, problems = read_skill_file(data / "skills" / corpus / rel, fmt)
        if skill is None:
            notes.append(f"{r['id']}: not loaded: {problems[0].reason if problems else '?'}")
            globs: list[str] = []
        else:
            globs = list(skill.globs)
        if globs != split_patterns(r["globs"]):
            notes.append(f"{r['id']}: parsed globs {globs} differ from the index {r['globs']}")
        rules.append({"id": r["id"], "format": fmt, "globs": globs})
    return rules, notes


def run(data: Path) -> dict:
    rules, notes = load_rules(data)
    cases = [json.loads(line) for line in open(data / "glob" / "glob_cases.jsonl", encoding="utf-8")]
    out: dict = {"rules": len(rules), "cases": len(cases)}
    failures: dict[str, list] = {}
    for mode, key, path_key in ((VSCODE, "expected", "abs_path"), (MINIMATCH, "expected_minimatch", "path"),
                                (MINIMATCH_DOT, "expected_minimatch_dot", "path")):
        ok = 0
        t0 = time.perf_counter()
        for c in cases:
            got = {r["id"] for r in rules
                   if r["globs"] and matcher_for(r["globs"], mode).match(c["path"], c["abs_path"])}
            if got == set(c[key]):
                ok += 1
            else:
                failures.setdefault(mode, []).append({"path": c[path_key], "extra": sorted(got - set(c[key]))[:5],
                                                      "missing": sorted(set(c[key]) - got)[:5]})
        out[f"{mode}_exact"] = round(ok / len(cases), 4)
        out[f"{mode}_ms_per_path"] = round((time.perf_counter() - t0) * 1000 / len(cases), 3)
    ok = 0
    for c in cases:
        good = True
        for fmt, (mode, key) in NATIVE.items():
            exp = {i for i in c[key] if any(r["id"] == i and r["format"] == fmt for r in rules)}
            got = {r["id"] for r in rules if r["format"] == fmt and r["globs"]
                   and matcher_for(r["globs"], mode).match(c["path"], c["abs_path"])}
            good &= got == exp
        ok += good
    out["native_exact"] = round(ok / len(cases), 4)
    out["loader_notes"] = notes
    out["failures"] = {k: v[:5] for k, v in failures.items()}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    ap.add_argument("--json", action="store_true", help="print only the final JSON object")
    args = ap.parse_args(argv)
    res = run(Path(args.data))
    if not args.json:
        print(f"{res['rules']} rules x {res['cases']} paths (globs parsed from the rule files by Mnemo)")
        for mode in (VSCODE, MINIMATCH, MINIMATCH_DOT):
            print(f"  {mode:14s} exact {res[f'{mode}_exact']:.3f}  ({res[f'{mode}_ms_per_path']} ms per path)")
        print(f"  native modes   exact {res['native_exact']:.3f}")
        for n in res["loader_notes"]:
            print("  note:", n)
    summary = {"vscode_exact": res["vscode_exact"], "minimatch_exact": res["minimatch_exact"],
               "minimatch_dot_exact": res["minimatch_dot_exact"], "native_exact": res["native_exact"],
               "rules": res["rules"], "cases": res["cases"], "loader_notes": len(res["loader_notes"]),
               "failures": res["failures"]}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
