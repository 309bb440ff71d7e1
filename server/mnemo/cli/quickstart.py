"""`mnemo quickstart`: Mnemo's main job on a demo, never on the user's own data.

The demo runs in a temporary directory that holds its own store (an embedded, in-process engine: no owner process,
not `~/.mnemo`) and a small demo project whose docs the notes are true about. Both are removed afterwards. Nothing
is written to the user's store, and no claim is made about the repository the command runs in.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

from mnemo.cli.output import console, print_cards, rule, say

DEMO_NAME = "demo-shop"
DEMO_FILES = {
    "README.md": "# Demo shop\n\nA tiny web shop that `mnemo quickstart` creates to show what Mnemo does.\n\n"
                 "## Running the tests\n\nRun `make test`: it starts the fake payment provider, then runs pytest.\n",
    "docs/payments.md": "# Payments\n\n## Retries\n\nEvery POST to the payments API carries an `Idempotency-Key` "
                        "header, so a retried request never charges a card twice.\n\n## Refunds\n\n"
                        "Refunds go through `refund_order()`; a partial refund may not exceed the captured "
                        "amount.\n",
    "docs/deploy.md": "# Deploying\n\n## Staging\n\n`make deploy-staging` builds the image and rolls it out to "
                      "the staging cluster.\n",
    "Makefile": "test:\n\t./scripts/fake-provider.sh & pytest -q\n\ndeploy-staging:\n\t./scripts/deploy.sh staging\n",
}
DEMO_MEMORIES = [
    ("payments API requires idempotency keys on every POST", "project", "decision"),
    ("Run the tests with `make test`; it starts the fake payment provider first", "project", "fact"),
    ("refunds above 500 EUR need a second approver", "project", "decision"),
]
DEMO_QUERIES = ["how do I make POST requests safe to retry?", "how do I run the tests?"]
# Settings that point at the user's own project or team: the demo must not follow them.
_USER_ENV_PREFIXES = ("MNEMO_PROJECT_", "MNEMO_TEAM_", "MNEMO_HOME", "MNEMO_DEFAULT_BRANCH")


def register(sub, common) -> None:  # noqa: ARG001 - the demo takes no store or project options
    p = sub.add_parser("quickstart", help="a demo in a temporary store and demo project (removed afterwards): "
                                          "index docs, remember and recall a few notes, show the cards")
    p.set_defaults(func=cmd_quickstart, needs_service=False)


@contextmanager
def _demo_env():
    saved = {k: v for k, v in os.environ.items() if k.startswith(_USER_ENV_PREFIXES)}
    for k in saved:
        del os.environ[k]
    try:
        yield
    finally:
        os.environ.update(saved)


def make_demo_project(base: Path) -> Path:
    root = base / DEMO_NAME
    for rel, text in DEMO_FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def run_demo(base: Path) -> None:
    from mnemo.core.engine import Engine
    from mnemo.core.identity import detect_context
    from mnemo.service import LocalService

    root = make_demo_project(base)
    engine = Engine(base / "store")
    try:
        service = LocalService(engine)
        ctx = detect_context(root).to_dict()
        c = console()
        res = service.index_docs(ctx, str(root))
        say(("indexed", "green"), f" {res['files']} Markdown files of the demo project into "
                                  f"{res['blocks_written']} blocks", c=c)
        for text, typ, kind in DEMO_MEMORIES:
            r = service.remember(ctx, text, type=typ, kind=kind)
            say((r["message"], "green"), f" {r['memory']['id']}: ", text, c=c)
        engine.wait_indexed(timeout=30.0)  # the dense index catches up with the notes just written
        for q in DEMO_QUERIES:
            rule(f"recall: {q}", c)
            out = service.recall(ctx, q, limit=3)
            print_cards(out["cards"], out.get("warnings"), out.get("took_ms"))
    finally:
        engine.close()


def cmd_quickstart(args, _service) -> int:  # noqa: ARG001
    from mnemo.daemon.paths import default_home

    c = console()
    base = Path(tempfile.mkdtemp(prefix="mnemo-quickstart-"))
    rule("Mnemo quickstart · a demo project in a temporary store", c)
    say(f"The demo runs in {base} (its own store and the demo project {DEMO_NAME}); it is removed at the end. "
        f"Your store ({default_home()}) and the repository you are in are not touched.", c=c)
    try:
        with _demo_env():
            run_demo(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    rule("done", c)
    say(("removed", "green"), f" the demo store and project ({base}).", c=c)
    say("On your own repository: `mnemo index` (its Markdown docs), `mnemo remember \"...\"`, "
        "`mnemo recall \"...\"`, `mnemo stats`, `mnemo doctor`.", c=c)
    say("Editors: install the extension from vscode-extension/ (see README); it starts `python -m mnemo lsp`. "
        "Any LSP editor: `mnemo lsp` (stdio). Agents: `mnemo mcp` (stdio MCP server).", c=c)
    return 0
