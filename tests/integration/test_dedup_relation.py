"""The write path's relation decision with the real MiniLM model, over the real CLI and owner (issue 21, item 4):
a paraphrase that replaces everyday words in two places is a confirmation, not a second copy; two notes about the
same people or services in exchanged roles are two facts (neither a confirmation nor a conflict); a note about
every service after one about a single service is another fact."""

from __future__ import annotations

import json
import os

import pytest

from conftest import run_cli
from mnemo.daemon.client import DaemonService


@pytest.fixture
def cli(tmp_path, git_repo):
    home = tmp_path / "store"
    env = {"MNEMO_IDLE_TIMEOUT": "120", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.update({k: "" for k in ("MNEMO_EMBEDDER",) if k in os.environ})

    def run(*args):
        r = run_cli(*args, "--json", home=home, cwd=git_repo, env=env, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        return json.loads(r.stdout)

    yield run
    DaemonService(home, autostart=False).shutdown()


def test_paraphrase_is_confirmed_and_exchanged_roles_are_two_facts(cli):
    first = cli("remember", "payments API requires idempotency keys on every POST request")
    assert first["status"] == "created"
    again = cli("remember", "The payments API needs an idempotency key on each POST call")
    assert again["status"] == "confirmed" and again["memory"]["id"] == first["memory"]["id"], again

    for old, new in (("Melanie values her friendship with Caroline",
                      "Caroline appreciates her friendship with Melanie"),
                     ("Caroline taught Melanie to paint", "Melanie taught Caroline to paint"),
                     ("The checkout service logs in JSON", "Every service logs in JSON"),
                     # another subject in two places is another fact, not a rewording (these were confirmed into
                     # one note when the two-place rewording rule was added, and their facts lost)
                     ("only the catalog team may change the catalog_dynamodb schema",
                      "only the pricing team may change the pricing_dynamodb schema"),
                     ("search releases go out every wednesday after the freeze",
                      "catalog releases go out every thursday after the freeze")):
        a = cli("remember", old)
        b = cli("remember", new)
        assert a["status"] == "created" and b["status"] == "created", (old, new, b)
        assert b["memory"]["id"] != a["memory"]["id"] and not b["conflicts"], b
    assert cli("review", "--kind", "conflict")["total"] == 0
    texts = {m["text"] for m in cli("list")["memories"]}
    assert {"Caroline taught Melanie to paint", "Melanie taught Caroline to paint"} <= texts
