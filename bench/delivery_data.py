"""Writes bench/data/delivery_dev.jsonl: the delivery dev set (issue 20). Run once; the file is committed.

    python bench/delivery_data.py          # rewrites bench/data/delivery_dev.jsonl

Three repositories laid out as real ones from real rule files (../shared/data/skills, read their README), each
holding a team's own rules in two or more formats, always-on rules (Continue rules without globs), rules over
2,000 tokens, code with anchored memories (some made stale by a later code change), and Mnemo's starter skills on
(as shipped). The requests: the held-out activation dev set (bench/data/activation_dev.jsonl, its tune/test split
kept: the activation model was fitted on its tune half), the everyday chatter (bench/data/activation_chatter.jsonl),
and requests written here for the issue's own complaints (a Makefile rule, a team's `sql` rule beside the starter
`sql-database`, a shell rule beside `shell-scripts`) and for the memories. Records:

- ``{"type": "repo", "name", "rules": [[corpus, path in the corpus], ...], "code": {path: text},
  "memories": [{"id", "text", "anchor": {"file", "symbol"} | null}], "changes": {path: text}}``: ``changes``
  are written after the memories were anchored (a code change the memory's anchor no longer matches).
- ``{"type": "case", "id", "repo", "split", "kind", "file", "request", "expected": [[alternatives], ...],
  "memories": [ids], "stale": [ids]}``: ``expected`` names rules as bench/skill_data.short_name does.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE.parents[1] / "shared" / "data"
OUT = HERE / "data" / "delivery_dev.jsonl"

# repository -> the activation dev set's corpora whose requests run there, and the rule corpora it holds
REPOS = {
    "team-a": ("copilot_instructions", "continue_rules", "starter"),
    "team-b": ("cursorrules_current", "wshobson_skills"),
    "team-c": ("cursor_mdc_sanjeed5",),
}
DISTRACTORS = 14  # rules of each corpus in a repository beside the ones the requests expect
EXTRA = {"team-c": ("copilot_instructions", 10)}  # a second format: distractor rules only (no requests of theirs)

PAYMENTS = '''import requests

API = "https://pay.example.com"


def charge(customer_id, amount_cents):
    resp = requests.post(f"{API}/charges", json={"customer": customer_id, "amount": amount_cents}, timeout=10)
    resp.raise_for_status()
    return resp.json()["id"]


def refund(charge_id):
    resp = requests.post(f"{API}/refunds", json={"charge": charge_id}, timeout=10)
    resp.raise_for_status()
    return resp.json()
'''
PAYMENTS_CHANGED = PAYMENTS.replace('''def refund(charge_id):
    resp = requests.post(f"{API}/refunds", json={"charge": charge_id}, timeout=10)''', '''def refund(charge_id, reason="requested"):
    resp = requests.post(f"{API}/refunds", json={"charge": charge_id, "reason": reason}, timeout=30)''')

WORKER = '''import time


def poll(queue, handler, interval=2.0):
    while True:
        job = queue.pop()
        if job is None:
            time.sleep(interval)
            continue
        handler(job)


def drain(queue):
    out = []
    while (job := queue.pop()) is not None:
        out.append(job)
    return out
'''
WORKER_CHANGED = WORKER.replace("def drain(queue):\n    out = []", "def drain(queue, limit=1000):\n    out = []")

CACHE = '''export function cacheKey(user: string, path: string): string {
  return `${user}:${path}`;
}

export async function fetchCached(url: string, ttlMs: number): Promise<Response> {
  const hit = memo.get(url);
  if (hit && Date.now() - hit.at < ttlMs) return hit.res.clone();
  const res = await fetch(url);
  memo.set(url, { at: Date.now(), res: res.clone() });
  return res;
}

const memo = new Map<string, { at: number; res: Response }>();
'''
CACHE_CHANGED = CACHE.replace("if (hit && Date.now() - hit.at < ttlMs) return hit.res.clone();",
                              "if (hit && Date.now() - hit.at <= ttlMs * 2) return hit.res.clone();")

MAKEFILE = "CC ?= cc\n\nall: app\n\napp: main.o util.o\n\t$(CC) -o $@ $^\n\nclean:\n\trm -f app *.o\n"
MEMORY_REPOS = {
    "team-a": {
        "code": {"shop/payments.py": PAYMENTS, "shop/__init__.py": "", "Makefile": MAKEFILE},
        "changes": {"shop/payments.py": PAYMENTS_CHANGED},
        "memories": [
            {"id": "a-charge", "anchor": {"file": "shop/payments.py", "symbol": "charge"},
             "text": "The payment provider deduplicates a charge only when the Idempotency-Key header carries the "
                     "order id; send it on every POST to /charges before adding any retry."},
            {"id": "a-refund", "anchor": {"file": "shop/payments.py", "symbol": "refund"},
             "text": "refund() is called by the nightly reconciliation job, which counts the refunds by the dict "
                     "it returns: keep it synchronous and keep returning the provider's JSON."},
            {"id": "a-orders", "anchor": None,
             "text": "The orders table is partitioned by month: a query without created_at in its WHERE clause "
                     "scans every partition and times out in production."},
            {"id": "a-pnpm", "anchor": None,
             "text": "The web frontend is built with pnpm (pnpm-lock.yaml is the lockfile); npm install breaks "
                     "the workspace links."},
        ],
    },
    "team-b": {
        "code": {"jobs/worker.py": WORKER, "jobs/__init__.py": ""},
        "changes": {"jobs/worker.py": WORKER_CHANGED},
        "memories": [
            {"id": "b-poll", "anchor": {"file": "jobs/worker.py", "symbol": "poll"},
             "text": "poll() must catch the handler's exceptions itself: an uncaught one kills the worker "
                     "process and the supervisor only restarts it after five minutes."},
            {"id": "b-drain", "anchor": {"file": "jobs/worker.py", "symbol": "drain"},
             "text": "drain() runs during deploys with the queue paused; it must return every job so the new "
                     "release can requeue them."},
            {"id": "b-sentry", "anchor": None,
             "text": "Errors are reported to Sentry through the logging handler; never call sentry_sdk directly "
                     "from job code."},
        ],
    },
    "team-c": {
        "code": {"web/cache.ts": CACHE},
        "changes": {"web/cache.ts": CACHE_CHANGED},
        "memories": [
            {"id": "c-fetch", "anchor": {"file": "web/cache.ts", "symbol": "fetchCached"},
             "text": "fetchCached keeps responses in process memory per server instance; the TTL must stay "
                     "under the CDN's 60 seconds or users see stale prices."},
            {"id": "c-key", "anchor": {"file": "web/cache.ts", "symbol": "cacheKey"},
             "text": "cacheKey includes the user so one customer's prices never leak to another; do not drop "
                     "the user part when adding the locale."},
            {"id": "c-release", "anchor": None,
             "text": "Releases are cut from the release branch on Thursdays; a hotfix needs a second reviewer "
                     "from the on-call rotation."},
        ],
    },
}

# the issue's own complaints, in team-a (copilot makefile + shell rules, a Cursor `sql` rule: PatrickJS
# postgresql.mdc, beside the starter skills shell-scripts and sql-database)
ISSUE_RULES = [("copilot_instructions", "instructions/makefile.instructions.md"),
               ("copilot_instructions", "instructions/shell.instructions.md"),
               ("cursorrules_current", "rules/postgresql.mdc")]
ISSUE_CASES = [
    ("Makefile", "make the build only rebuild the objects whose sources changed", [["makefile"]]),
    ("Makefile", "add a phony clean target and stop make from printing every command", [["makefile"]]),
    (None, "why does make rerun every recipe even when nothing changed since the last build", [["makefile"]]),
    ("build/common.mk", "split the compiler flags into a variable I can override from the command line",
     [["makefile"]]),
    ("db/migrations/0003_add_orders.sql", "add a migration that adds an index on orders.customer_id",
     [["sql"]]),
    ("db/migrations/0004_users.sql", "add a created_at column to users with a sensible default", [["sql"]]),
    (None, "write a database migration that renames the status column without downtime", [["sql"]]),
    ("db/queries/report.sql", "this monthly report query is slow, what index does it need", [["sql"]]),
    ("scripts/deploy.sh", "make the deploy script retry the upload three times before giving up", [["shell"]]),
    ("scripts/backup.sh", "the backup script keeps going after a failed step; make it stop on the first error",
     [["shell"]]),
    (None, "write a bash script that rotates the log files and keeps the last seven", [["shell"]]),
    ("scripts/ci.sh", "quote the variables and check that the tools exist before running", [["shell"]]),
]

MEMORY_CASES = [
    ("team-a", "shop/payments.py", "add retries to the POST calls", ["a-charge"], []),
    ("team-a", "shop/payments.py", "make charge() safe to call twice for the same order", ["a-charge"], []),
    ("team-a", None, "the charge endpoint double charges customers when we retry the POST", ["a-charge"], []),
    ("team-a", "shop/payments.py", "make refunds asynchronous with a background queue", ["a-refund"],
     ["a-refund"]),
    ("team-a", None, "why is the monthly orders query timing out in production", ["a-orders"], []),
    ("team-a", None, "install the frontend dependencies and fix the broken workspace links", ["a-pnpm"], []),
    ("team-b", "jobs/worker.py", "the worker dies when a handler raises, make it survive", ["b-poll"], []),
    ("team-b", "jobs/worker.py", "change drain so it stops after the first hundred jobs", ["b-drain"],
     ["b-drain"]),
    ("team-b", None, "report job failures to Sentry from the payment job", ["b-sentry"], []),
    ("team-b", "jobs/worker.py", "what happens to queued jobs during a deploy", ["b-drain"], ["b-drain"]),
    ("team-c", "web/cache.ts", "raise the cache TTL for the price endpoint to five minutes", ["c-fetch"],
     ["c-fetch"]),
    ("team-c", "web/cache.ts", "add the locale to the cache key", ["c-key"], []),
    ("team-c", None, "how do we ship a hotfix to production this week", ["c-release"], []),
    ("team-c", "web/cache.ts", "why do users see old prices after we change them", ["c-fetch"], ["c-fetch"]),
]

# requests a coding agent gets that need no rule and no memory, with a file at hand (the dev set's own negatives
# have none)
NEGATIVE_FILE_CASES = [
    ("team-a", "shop/payments.py", "rename this module's API constant to BASE_URL"),
    ("team-a", "shop/__init__.py", "what does this empty file do"),
    ("team-b", "jobs/__init__.py", "thanks, that's all for now"),
    ("team-b", "jobs/worker.py", "continue"),
    ("team-c", "web/cache.ts", "looks good, commit it"),
    ("team-c", "web/cache.ts", "undo your last change"),
]


# Specific before generic (issue 20, point 2): where team-a holds a rule of its own for a starter skill's topic,
# that rule is an acceptable answer wherever the starter skill is (the starter yields to it)
OWN_FOR_STARTER = {"starter:shell-scripts": ["shell"], "starter:sql-database": ["sql"],
                   "starter:docker": ["dockerfile-best-practices", "containerization-docker-best-practices"],
                   "starter:github-actions": ["github-actions", "github-actions-ci-cd-best-practices"],
                   "starter:security-review": ["secure-coding-practices", "security-and-owasp"],
                   "starter:typescript": ["typescript-best-practices", "typescript-node-development",
                                          "typescript-type-safety"]}


def _with_own(groups: list[list[str]], repo: str) -> list[list[str]]:
    if repo != "team-a":
        return groups
    return [g + [x for n in g for x in OWN_FOR_STARTER.get(n, []) if x not in g] for g in groups]


def _corpus_files(corpus: str) -> dict[str, str]:
    """short name -> path inside the corpus folder (as bench/skill_data.short_name names them)."""
    root = DATA / "skills" / corpus
    out: dict[str, str] = {}
    for p in sorted(root.rglob("*")):
        if not p.is_file() or p.suffix not in (".md", ".mdc") or p.name == "LICENSE":
            continue
        if corpus == "wshobson_skills":
            if p.name != "SKILL.md":
                continue
            name = p.parent.name
        else:
            name = p.name
            for ext in (".instructions.md", ".mdc", ".md", ".md"):
                if name.endswith(ext):
                    name = name[: -len(ext)]
        out.setdefault(name, p.relative_to(root).as_posix())
    return out


def build() -> list[dict]:
    dev = [json.loads(line) for line in open(HERE / "data" / "activation_dev.jsonl", encoding="utf-8")]
    chatter = [json.loads(line) for line in open(HERE / "data" / "activation_chatter.jsonl", encoding="utf-8")]
    files = {c: _corpus_files(c) for c in ("copilot_instructions", "cursorrules_current", "cursor_mdc_sanjeed5",
                                           "continue_rules", "wshobson_skills")}
    out: list[dict] = []
    cases: list[dict] = []
    for repo, corpora in REPOS.items():
        rules: list[tuple[str, str]] = []
        recs = [r for r in dev if r["corpus"] in corpora]
        wanted = {n for r in recs for g in r["expected"] for n in g if not n.startswith("starter:")}
        for corpus in corpora:
            if corpus == "starter":
                continue
            names = sorted(files[corpus])
            mine = [n for n in names if n in wanted]
            step = max(1, len(names) // DISTRACTORS)
            others = [n for n in names[::step] if n not in wanted][:DISTRACTORS]
            if corpus == "continue_rules":  # a Continue user's whole collection: ~29 rules without globs
                others = [n for n in names if n not in wanted]
            rules += [(corpus, files[corpus][n]) for n in mine + others]
        if repo in EXTRA:
            corpus, n = EXTRA[repo]
            names = sorted(files[corpus])
            rules += [(corpus, files[corpus][x]) for x in names[5::max(1, len(names) // n)][:n]]
        if repo == "team-a":
            rules += [r for r in ISSUE_RULES if r not in rules]
        present = {Path(p).name for _c, p in rules} | {Path(p).parent.name for _c, p in rules}
        for r in recs:
            names = [n for g in r["expected"] for n in g]
            if any(not n.startswith("starter:") and not any(n in x for x in present) for n in names) and \
                    not all(any(x.startswith("starter:") or x in wanted for x in g) for g in r["expected"]):
                continue
            cases.append({"type": "case", "id": r["id"], "repo": repo, "split": r["split"], "kind": r["kind"],
                          "file": r["file"], "request": r["request"], "expected": _with_own(r["expected"], repo),
                          "memories": [],
                          "stale": []})
        mem = MEMORY_REPOS[repo]
        out.append({"type": "repo", "name": repo, "rules": [list(x) for x in rules], "code": mem["code"],
                    "memories": mem["memories"], "changes": mem["changes"]})
    for i, (file, req, exp) in enumerate(ISSUE_CASES):
        cases.append({"type": "case", "id": f"issue-{i:02d}", "repo": "team-a", "split": "tune" if i % 2 else "test",
                      "kind": "issue", "file": file, "request": req, "expected": exp, "memories": [], "stale": []})
    turn = {True: 0, False: 0}          # stale and fresh cases each alternate between the halves
    for i, (repo, file, req, mems, stale) in enumerate(MEMORY_CASES):
        turn[bool(stale)] += 1
        split = "test" if turn[bool(stale)] % 2 else "tune"
        cases.append({"type": "case", "id": f"mem-{i:02d}", "repo": repo, "split": split,
                      "kind": "memory", "file": file, "request": req, "expected": [], "memories": mems,
                      "stale": stale})
    for i, (repo, file, req) in enumerate(NEGATIVE_FILE_CASES):
        cases.append({"type": "case", "id": f"negf-{i:02d}", "repo": repo, "split": "tune" if i % 2 else "test",
                      "kind": "negative", "file": file, "request": req, "expected": [], "memories": [],
                      "stale": []})
    repos = list(REPOS)
    for i, r in enumerate(chatter):
        cases.append({"type": "case", "id": f"chat-{r['id']}", "repo": repos[i % len(repos)], "split": r["split"],
                      "kind": "chatter", "file": None, "request": r["request"], "expected": [], "memories": [],
                      "stale": []})
    return out + cases


def main() -> int:
    recs = build()
    with open(OUT, "w", encoding="utf-8") as f:
        for r in recs:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    n = [r for r in recs if r["type"] == "case"]
    print(f"{OUT}: {len(n)} cases ({sum(c['split'] == 'test' for c in n)} test), "
          f"{len(recs) - len(n)} repositories")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
