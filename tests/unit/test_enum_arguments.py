"""Every argument that takes one of a fixed set of values refuses anything else, at the service (so the CLI, the
language server and the MCP server say the same), naming the accepted values. Issue 13: `list --status bogus`
answered an empty table with exit 0, and `skills check --format bogus` crashed with a traceback."""

from __future__ import annotations

import pytest

from mnemo.cli import main
from mnemo.core.errors import InvalidInput
from mnemo.core.models import MEMORY_TYPES, READ_SCOPES, SOURCES, STATUSES
from mnemo.core.skills.registry import FORMATS
from mnemo.service import LocalService

CASES = {
    "list status": (lambda s, c: s.list_memories(c, status="bogus"), STATUSES),
    "list type": (lambda s, c: s.list_memories(c, type="bogus"), MEMORY_TYPES),
    "list scope": (lambda s, c: s.list_memories(c, scope="bogus"), READ_SCOPES),
    "recall scope": (lambda s, c: s.recall(c, "deploys", scope="bogus"), READ_SCOPES),
    "recall types": (lambda s, c: s.recall(c, "deploys", types=["bogus"]), MEMORY_TYPES),
    "remember type": (lambda s, c: s.remember(c, "deploys need the VPN", type="bogus"), MEMORY_TYPES),
    "remember source": (lambda s, c: s.remember(c, "deploys need the VPN", source="bogus"), SOURCES),
    "remember on_conflict": (lambda s, c: s.remember(c, "deploys need the VPN", on_conflict="bogus"),
                             ("review", "supersede", "keep_both")),
    "promote to": (lambda s, c: s.promote(c, "mem-x", "bogus"), ("global", "team")),
    "hydrate mode": (lambda s, c: s.hydrate(c, "mem-x", "bogus"), ("default", "related")),
    "review kind": (lambda s, c: s.review_list(c, kind="bogus"), ("conflict", "override", "pending")),
    "snapshot strategy": (lambda s, c: s.snapshot_diff(c, "/nonexistent.mnemo", strategy="bogus"),
                          ("local_wins", "remote_wins", "newer_wins", "keep_both")),
    "snapshot scope": (lambda s, c: s.snapshot_export(c, "/tmp/x.mnemo", scopes=["bogus"]), ("project", "global")),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_unknown_enum_values_are_refused_naming_the_accepted_ones(engine, ctx, case):
    call, accepted = CASES[case]
    with pytest.raises(InvalidInput) as err:
        call(LocalService(engine), ctx.to_dict())
    said = f"{err.value.message} {err.value.hint}"
    assert "bogus" in said
    for value in accepted:
        assert value in said, (case, value, said)


def test_cli_refuses_unknown_status_and_skill_format(engine, git_repo, capsys):
    svc = LocalService(engine)
    assert main(["list", "--status", "bogus", "-C", str(git_repo)], service=svc) == 2
    err = capsys.readouterr().err
    assert "unknown status 'bogus'" in err and "active, pending, rejected" in err
    assert main(["skills", "check", "--dir", str(git_repo), "--format", "bogus"], service=svc) == 2
    err = capsys.readouterr().err
    assert "unknown skill format 'bogus'" in err and all(f in err for f in FORMATS) and "Traceback" not in err
