"""Delivery (issue 20): what reaches the agent, run through `mnemo context` exactly as shipped. TEST split.

    python bench/delivery.py --json          # ~3 min; last line: one JSON object

The dev set bench/data/delivery_dev.jsonl (written by bench/delivery_data.py, which says how it was built): three
repositories laid out as real ones from real rule files (../shared/data/skills) in two or more formats each, with
always-on rules, rules over 2,000 tokens, Mnemo's starter skills on (as shipped), code with anchored memories (some
made stale by a later code change); requests with and without a file, and negatives. Each case runs through the
service's `context` call with its defaults (event `context`, budget 2,000 tokens, as `mnemo context --file F -m M`
runs it) in-process (`LocalService`), and what reaches the agent is scored:

- `delivered`: per expected rule (any of its acceptable alternatives) or memory, its text is in the block (a line
  of the rule's own body of 30 characters or more, or the memory's words); the mean over positive cases of the
  share delivered.
- `delivered_of_activated`: the same, over the expected rules the activation chose (the rule is among the
  context's items in any state: inlined, in part, referenced or dropped).
- `token_precision`: share of the block's skill and memory tokens that belong to expected items (always-on rules
  count against it unless expected); mean over positive cases with a non-empty block. `token_precision_request`
  leaves the always-on rules out of the count.
- `neg_quiet`: negatives whose block holds no memory and no skill the request chose (always-on rules allowed).
  `neg_quiet_anchored_allowed`: the same, allowing the memories anchored to the file at hand (the block shows
  them whatever the request says, by design: issue 20 point 5), which `neg_quiet` counts as noise.
- `tokens_median`: the median `tokens` of the JSON answer over every test case.
- `stale_flagged`: memories whose anchored code changed: their item in the block (header line through quote)
  carries the stale warning. The memories are anchored as `mnemo anchor` does (`service.anchor`, path stored
  project-relative); before 2026-12-01 the bench passed absolute anchor paths to `remember` and looked for the
  word "stale" on the id's line only, so it read 0.0 whatever the block said.
- `cold_session_start_ms` / `cold_first_prompt_ms`: the installed hook command (`python -m mnemo hook
  session-start`, then `... hook prompt`) with Claude Code's inputs against a stopped owner: time to the answer
  when it delivered the hand-off / a block (null when it delivered nothing; `*_delivered` says).
- `corrections_meaning_kept`: on bench/data/corrections.jsonl (test, corrections with a negation), the share whose
  learned note (`core.corrections.memory_text`) keeps every negation after a conversational lead-in (fillers and
  an interjected "no": "ugh, no, don't ..." must keep its "don't", "no need to ..." its "no need").
Nothing is fitted here; tune figures are printed beside test ones.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

from scratch import scratch_dir  # bench/ is on sys.path when run as a script

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "server"))
sys.path.insert(0, str(REPO / "bench"))

DEV = REPO / "bench" / "data" / "delivery_dev.jsonl"
CORRECTIONS = REPO / "bench" / "data" / "corrections.jsonl"


def target(corpus: str, rel: str) -> Path:
    from skill_data import _target

    return _target(corpus, Path(rel) if corpus != "wshobson_skills" else Path(rel), Path(rel))


def rule_name(path: str, builtin: str | None) -> str:
    p = Path(path)
    if builtin and path.startswith(builtin):
        return "starter:" + p.stem
    if p.name == "SKILL.md":
        return p.parent.name
    name = p.name
    for ext in (".instructions.md", ".mdc", ".md", ".md"):
        if name.endswith(ext):
            name = name[: -len(ext)]
    return name


def body_lines(path: Path) -> list[str]:
    """Lines of a rule's own body (no header) long enough to identify it in a block."""
    from mnemo.core.skills import read_skill_file
    from mnemo.core.text import strip_controls

    skill, _ = read_skill_file(path)
    if skill is None:
        return []
    out = []
    for line in strip_controls(skill.body).splitlines():
        s = line.strip()
        if len(s) >= 30 and not s.startswith("#") and not s.startswith("```"):
            out.append(s)
    return out


def layout(root: Path, data: Path, repo: dict) -> dict[str, Path]:
    """The repository on disk; returns rule name -> file."""
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    names: dict[str, Path] = {}
    for corpus, rel in repo["rules"]:
        src = data / "skills" / corpus / rel
        if corpus in ("cursorrules_current", "cursor_mdc_sanjeed5"):
            dst = Path(".cursor/rules") / Path(rel).name
        elif corpus == "copilot_instructions":
            dst = Path(".github/instructions") / Path(rel).name
        elif corpus == "continue_rules":
            dst = Path(".continue/rules") / Path(rel).relative_to("rules")
        else:
            dst = Path(".claude/skills") / Path(rel).parent.name / "SKILL.md"
        if rel == "rules/postgresql.mdc":
            dst = Path(".cursor/rules/sql.mdc")   # the team `sql` rule
        out = root / dst
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, out)
        names[rule_name(str(out), None)] = out
    for rel, text in repo["code"].items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@x", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "b@x"}
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "commit", "-qm", "init"], check=True, env=env)
    return names


NEG = re.compile(r"\b(?:no|not|never|don't|dont|do not|stop|without|n't|no need)\b|n't\b", re.IGNORECASE)
# The conversational lead-in a learned note drops (issue 20 point 7: "the person's words minus a conversational
# lead-in"): fillers ("hmm", "ugh", "actually", ...) and an interjected "no" (before punctuation, or before
# "don't" / a pronoun: "no don't write ...", "no we use ..."), never the "no" of "no need to ..." / "no Optional".
LEAD = re.compile(r"^\s*(?:(?:hmm+|ugh|actually|well|oh|ah|uh|um|ok|okay)\b[\s,.!;:\u2014-]*)*"
                  r"(?:(?:no|nope|nah)\s*[,.!;:\u2014-]+\s*|(?:no|nope|nah)\s+(?=(?:don't|do not|never|we|i|you|it|"
                  r"that|use)\b))?", re.IGNORECASE)


def corrections_meaning(path: Path = CORRECTIONS) -> dict:
    from mnemo.core.agent.corrections import memory_text, sentences

    rows = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    kept, n = 0, 0
    for r in rows:
        if r.get("split") != "test" or r.get("label") != 1:
            continue
        for s in sentences(r["prompt"]):
            need = len(NEG.findall(LEAD.sub("", s)))
            if not need:
                continue
            n += 1
            kept += len(NEG.findall(memory_text(s))) >= need
    return {"corrections_meaning_kept": round(kept / n, 4) if n else None, "corrections_negation_n": n}


def hook(cmd: list[str], payload: dict, env: dict, cwd: Path) -> tuple[float, str, str]:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, input=json.dumps(payload), capture_output=True, text=True, env=env, cwd=cwd, timeout=60)
    return (time.perf_counter() - t0) * 1000, p.stdout, p.stderr


def cold_start(home: Path, root: Path) -> dict:
    """The installed hook commands against a stopped owner (session-start), then at once the first prompt."""
    env = {**os.environ, "MNEMO_HOME": str(home), "PYTHONPATH": str(REPO / "server")}
    env.pop("MNEMO_NO_DAEMON", None)
    cmd = [sys.executable, "-m", "mnemo", "hook"]
    sid = f"bench-{uuid.uuid4().hex}"
    base = {"session_id": sid, "transcript_path": "/nonexistent", "cwd": str(root), "permission_mode": "default"}
    out: dict = {}
    try:
        ms, so, se = hook(cmd + ["session-start"], {**base, "hook_event_name": "SessionStart", "source": "startup"},
                          env, root)
        got = "Hand-off from the last session" in so
        out.update(cold_session_start_ms=round(ms, 1) if got else None, cold_session_start_delivered=got,
                   cold_session_start_wall_ms=round(ms, 1), cold_session_start_stderr=se.strip()[-200:])
        ms, so, se = hook(cmd + ["prompt"], {**base, "hook_event_name": "UserPromptSubmit",
                                             "prompt": "add retries to the POST calls in shop/payments.py"}, env, root)
        got = "Mnemo memory" in so
        out.update(cold_first_prompt_ms=round(ms, 1) if got else None, cold_first_prompt_delivered=got,
                   cold_first_prompt_wall_ms=round(ms, 1), cold_first_prompt_stderr=se.strip()[-200:])
    finally:  # the owner the hooks started in the background may still be starting: stop it once it is up
        for _ in range(20):
            p = subprocess.run([sys.executable, "-m", "mnemo", "daemon", "stop", "--json"], env=env,
                               capture_output=True, text=True, timeout=60)
            if '"stopped": true' in p.stdout:
                break
            time.sleep(1)
    return out


def stale_marked(md: str, mid: str) -> bool:
    """The memory's item in the block (its header line through its quote) holds the stale warning (the
    block's `STALE_WARNING`) or says it is stale."""
    from mnemo.core.agent.context_block import STALE_WARNING

    lead = STALE_WARNING.split("(")[0].strip().lower()
    lines = md.splitlines()
    for i, ln in enumerate(lines):
        if mid not in ln:
            continue
        item = [ln]
        for nxt in lines[i + 1:]:
            if not nxt.strip() or nxt.startswith("#") or nxt.startswith("["):
                break
            item.append(nxt)
        text = "\n".join(item).lower()
        if lead in text or "stale" in text:
            return True
    return False


def score(cases: list[dict], results: dict[str, dict], lines: dict[tuple[str, str], list[str]],
          mem_text: dict[tuple[str, str], str], mem_ids: dict[tuple[str, str], str], builtin: str) -> dict:
    deliv, deliv_act, prec, prec_req, quiet, toks, stale, quiet_anchored = [], [], [], [], [], [], [], []
    for c in cases:
        res = results[c["id"]]
        md = res.get("markdown") or ""
        toks.append(res.get("tokens", 0))
        items = res.get("items", []) + res.get("dropped", [])
        chosen = {rule_name(it.get("source_path") or "", builtin) for it in items if it.get("kind") == "skill"}
        exp_names = {n for g in c["expected"] for n in g}
        exp_mem = {mem_ids[(c["repo"], m)] for m in c["memories"]}
        if not c["expected"] and not c["memories"]:
            noisy = [it for it in res.get("items", []) if it.get("kind") == "memory"
                     or (it.get("kind") == "skill" and not it.get("always"))]
            quiet.append(not noisy)
            quiet_anchored.append(not [it for it in noisy if not str(it.get("section", "")).startswith("Memories about")])
            continue
        got = []
        for g in c["expected"]:
            hit = any(any(ln in md for ln in lines.get((c["repo"], n), [])) for n in g)
            got.append(hit)
            if any(n in chosen for n in g):
                deliv_act.append(hit)
        for m in c["memories"]:
            got.append(mem_text[(c["repo"], m)][:60] in md)
        deliv.append(sum(got) / len(got))
        total = good = total_req = 0
        for it in res.get("items", []):
            if it.get("kind") not in ("skill", "memory") or it.get("state") == "referenced":
                continue
            t = it.get("tokens", 0)
            ok = (it["kind"] == "memory" and it["id"] in exp_mem) or \
                (it["kind"] == "skill" and rule_name(it.get("source_path") or "", builtin) in exp_names)
            total += t
            good += t if ok else 0
            if not it.get("always") or ok:
                total_req += t
        if total:
            prec.append(good / total)
        if total_req:
            prec_req.append(good / total_req)
        for m in c["stale"]:
            mid = mem_ids[(c["repo"], m)]
            stale.append(stale_marked(md, mid))

    def mean(xs):
        return round(sum(xs) / len(xs), 4) if xs else None

    return {"delivered": mean(deliv), "delivered_of_activated": mean(deliv_act), "token_precision": mean(prec),
            "token_precision_request": mean(prec_req), "neg_quiet": mean(quiet),
            "neg_quiet_anchored_allowed": mean(quiet_anchored),
            "tokens_median": statistics.median(toks) if toks else None, "stale_flagged": mean(stale),
            "n_pos": len(deliv), "n_neg": len(quiet), "n_activated": len(deliv_act), "n_stale": len(stale)}


FITTED = re.compile(r"(# --- fitted: begin.*?\n)(.*?)(# --- fitted: end ---)", re.DOTALL)
GRID = {"WHOLE_MAX_SECONDARY": (400,), "SECTION_MIN": (0.5,), "LESS_LIKELY": (0.85,),
        "SECTION_MIN_LESS_LIKELY": (0.8,), "RESERVE_PER_LIKELY": (250,), "NOTE_MARGIN": (0.25,),
        "EXTRA_SECTION_SHARE_SECONDARY": (0.6, 1.01), "CHAT_MARGIN": (0.0, 0.1, 0.15),
        "SECONDARY_PART_MAX": (0, 250, 400)}
# Earlier passes (objective: the mean of delivered and token_precision): WHOLE_MAX_SECONDARY 400/800, SECTION_MIN
# 0.3-0.5, LESS_LIKELY 0-0.95, SECTION_MIN_LESS_LIKELY 0.5-9 (108 combinations) chose 400 / 0.5 / 0.85 / 1.0; the
# tune objective was flat in the first two. This pass adds the room kept for a second likely skill and weighs the
# three targets the issue sets (delivered, delivered_of_activated, token_precision) alike; the pass before this one
# searched LESS_LIKELY 0.7/0.85, SECTION_MIN_LESS_LIKELY 0.8/1.0 and RESERVE_PER_LIKELY 0/250 (the values above won).
# The third pass (docs/benchmarks.md, "Delivery (issue 20), third pass") keeps those and fits NOTE_MARGIN alone:
# 0.2 and 0.25 tie on tune (0.3 is worse); `--fit --write` would write the first, 0.2; 0.25, which leaves out
# fewer rules, was set by hand. A gate on rules the model gives
# less than 0.3 probability (0.3-0.45 tied on tune) was fitted and measured, then removed: it lost expected rules
# on test (docs/benchmarks.md).
# The fourth pass (docs/benchmarks.md, "Delivery (issue 20), fourth pass") keeps those and fits three new ones on
# tune: EXTRA_SECTION_SHARE_SECONDARY 0.6/0.8/1.01 (1.01: a rule after the most probable one gets no further
# section), SECONDARY_PART_MAX 0/150/250/400 (150 lost expected rules) and CHAT_MARGIN 0-0.2 (0.2 lost expected
# rules; 0.15 best, fitted before the chat floor CHAT_MIN was added, with which tune is flat in it).


def fit(svc, ctxs, tune, lines, mem_text, mem_ids, builtin, write: bool) -> int:
    """core/agent/context_block.py's fitted constants, chosen on the tune half: the mean of `delivered`,
    `delivered_of_activated` and `token_precision` (ties: fewer tokens)."""
    import itertools

    from mnemo.core.agent import context_block as cx

    rows = []
    names = list(GRID)
    for values in itertools.product(*GRID.values()):
        for k, v in zip(names, values, strict=True):
            setattr(cx, k, v)
        res = {c["id"]: svc.context(ctxs[c["repo"]], file=c["file"], message=c["request"]) for c in tune}
        r = score(tune, res, lines, mem_text, mem_ids, builtin)
        obj = (r["delivered"] + r["delivered_of_activated"] + r["token_precision"]) / 3
        rows.append((obj, -r["tokens_median"], values, r))
        print(f"{dict(zip(names, values, strict=True))}: objective {obj:.4f} {r}", flush=True)
    obj, _t, values, r = max(rows, key=lambda x: (x[0], x[1]))
    chosen = dict(zip(names, values, strict=True))
    print(json.dumps({"fitted": chosen, "objective": round(obj, 4), "tune": r}))
    if write:
        path = REPO / "server" / "mnemo" / "core" / "agent" / "context_block.py"
        src = path.read_text(encoding="utf-8")
        block = FITTED.search(src)
        if block is None:
            raise SystemExit(f"no fitted block in {path}")
        body = block.group(2)
        for k, v in chosen.items():
            body = re.sub(rf"^{k} = [0-9.]+", f"{k} = {v}", body, flags=re.MULTILINE)
        new = src[:block.start(2)] + body + src[block.end(2):]
        if new == src and body not in src:
            raise SystemExit(f"no fitted block in {path}")
        path.write_text(new, encoding="utf-8")
    svc.engine.close()
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(REPO.parents[0] / "shared" / "data"))
    ap.add_argument("--json", action="store_true", help="print only the final JSON object")
    ap.add_argument("--no-cold", action="store_true", help="skip the cold hook start (owner stopped)")
    ap.add_argument("--dump", default=None, help="write every case's block and items to this JSONL file")
    ap.add_argument("--fit", action="store_true", help="choose core/agent/context_block.py's fitted constants on the TUNE half")
    ap.add_argument("--write", action="store_true", help="with --fit: write them into core/agent/context_block.py")
    args = ap.parse_args(argv)
    data = Path(args.data)
    if not (data / "skills").is_dir():
        ap.error(f"no rule corpora under {data}/skills (pass --data ../shared/data)")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    recs = [json.loads(line) for line in open(DEV, encoding="utf-8") if line.strip()]
    repos = {r["name"]: r for r in recs if r["type"] == "repo"}
    cases = [r for r in recs if r["type"] == "case"]
    tmp = scratch_dir("mnemo-delivery-")
    home = tmp / "home"
    home.mkdir()
    os.environ["MNEMO_HOME"] = str(home)
    from mnemo.cli.anchor_cmd import code_anchor
    from mnemo.core.engine import Engine
    from mnemo.core.identity import detect_context
    from mnemo.core.skills import builtin_skills_dir
    from mnemo.service import LocalService

    builtin = str(builtin_skills_dir())
    svc = LocalService(Engine(home))
    ctxs, lines, mem_text, mem_ids, results = {}, {}, {}, {}, {}
    t0 = time.perf_counter()
    try:
        for name, repo in repos.items():
            root = tmp / name
            files = layout(root, data, repo)
            for n, p in files.items():
                lines[(name, n)] = body_lines(p)
            for p in Path(builtin).glob("*.md"):
                lines[(name, "starter:" + p.stem)] = body_lines(p)
            ctx = detect_context(str(root)).to_dict()
            ctxs[name] = ctx
            for m in repo["memories"]:
                res = svc.remember(ctx, m["text"])
                assert res["status"] == "created", res
                mem_ids[(name, m["id"])] = res["memory"]["id"]
                if m["anchor"]:   # as `mnemo anchor ID --file F --symbol S` does (the anchor stored project-relative)
                    svc.anchor(ctx, res["memory"]["id"],
                               code_anchor(str(root), m["anchor"]["file"], m["anchor"]["symbol"]))
                mem_text[(name, m["id"])] = m["text"]
            for rel, text in repo["changes"].items():   # the code changes after the notes were anchored
                (root / rel).write_text(text, encoding="utf-8")
        setup_s = time.perf_counter() - t0
        if args.fit:
            return fit(svc, ctxs, [c for c in cases if c["split"] == "tune"], lines, mem_text, mem_ids, builtin,
                       args.write)
        lat = []
        for c in cases:
            t1 = time.perf_counter()
            results[c["id"]] = svc.context(ctxs[c["repo"]], file=c["file"], message=c["request"])
            lat.append((time.perf_counter() - t1) * 1000)
        out = {}
        for split in ("test", "tune"):
            sub = [c for c in cases if c["split"] == split]
            r = score(sub, results, lines, mem_text, mem_ids, builtin)
            out.update(r if split == "test" else {"tune": r})
        out["by_kind"] = {k: score([c for c in cases if c["split"] == "test" and c["kind"] == k], results, lines,
                                   mem_text, mem_ids, builtin)["delivered"]
                          for k in sorted({c["kind"] for c in cases})}
        out["context_ms_p50"] = round(statistics.median(lat), 1)
        out["context_ms_p95"] = round(sorted(lat)[int(0.95 * (len(lat) - 1))], 1)
        out["n_cases"], out["n_test"] = len(cases), sum(c["split"] == "test" for c in cases)
        out.update(corrections_meaning())
        if args.dump:
            with open(args.dump, "w", encoding="utf-8") as f:
                for c in cases:
                    f.write(json.dumps({"case": c, "result": results[c["id"]]}, default=str) + "\n")
        if not args.no_cold:
            svc.session_end(ctxs["team-a"], "bench-prev", {"requests": ["add retries to the payment client"]},
                            client="claude-code")
    finally:
        svc.engine.close()
    if not args.no_cold:
        out.update(cold_start(home, tmp / "team-a"))
    out["setup_seconds"] = round(setup_s, 1)
    out["machine"] = f"{platform.machine()} {os.cpu_count()} cpu, Python {platform.python_version()}"
    out["load_avg_1m"] = round(os.getloadavg()[0], 2)
    shutil.rmtree(tmp, ignore_errors=True)
    if not args.json:
        keys = ("delivered", "delivered_of_activated", "token_precision", "neg_quiet", "tokens_median",
                "stale_flagged", "cold_session_start_ms", "cold_first_prompt_ms", "corrections_meaning_kept")
        for k in keys:
            print(f"{k:28} {out.get(k)}")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
