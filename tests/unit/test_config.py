"""Store-wide settings (`core/store_settings.py`): validation that names what is accepted, the environment as an override,
a damaged or hand-edited file reported (never silently used), changes seen without a restart, and the warnings a
client gets when the running owner does not apply its environment."""

from __future__ import annotations

import json

import pytest

from mnemo.core import store_settings as config
from mnemo.core.errors import InvalidInput


def test_values_are_validated_and_the_accepted_ones_named(home):
    with pytest.raises(InvalidInput) as e:
        config.set_value(home, "half_life", "12")
    assert "unknown setting 'half_life'" in e.value.message and "half_life_hours" in e.value.hint
    for key, raw, accepted in (("hot_max", "1.5", "a whole number from 0 to 10000"),
                               ("conflict_threshold", "2", "a number from 0 to 1"),
                               ("starter_skills", "maybe", "true or false"),
                               ("embedder", "gpt", "one of onnx, onnx-int8, torch, hash"),
                               ("idle_timeout", "nan", "a number >= 0")):
        with pytest.raises(InvalidInput) as e:
            config.set_value(home, key, raw)
        assert e.value.hint == f"{key} takes {accepted}"
    assert not config.path(home).exists()
    assert config.set_value(home, "starter_skills", "off") is False
    assert config.set_value(home, "hot_max", "3") == 3
    assert json.loads(config.path(home).read_text()) == {"hot_max": 3, "starter_skills": False}


def test_env_overrides_the_file_and_a_change_is_seen_at_once(home, monkeypatch):
    monkeypatch.delenv("MNEMO_HALF_LIFE_HOURS", raising=False)
    assert config.value("half_life_hours", home) == 168.0
    config.set_value(home, "half_life_hours", "12")
    assert config.value("half_life_hours", home) == 12.0
    config.set_value(home, "half_life_hours", "13")  # same size, same second: the inode changes (atomic replace)
    assert config.value("half_life_hours", home) == 13.0
    monkeypatch.setenv("MNEMO_HALF_LIFE_HOURS", "5")
    eff = config.effective(home)["half_life_hours"]
    assert (eff["value"], eff["source"], eff["stored"]) == (5.0, "env", 13.0)
    monkeypatch.setenv("MNEMO_HALF_LIFE_HOURS", "soon")  # a bad override is not applied, and says so
    eff = config.effective(home)["half_life_hours"]
    assert eff["value"] == 13.0 and "MNEMO_HALF_LIFE_HOURS='soon' is not valid" in eff["problems"][0]
    config.unset(home, "half_life_hours")
    monkeypatch.delenv("MNEMO_HALF_LIFE_HOURS")
    assert config.value("half_life_hours", home) == 168.0


def test_a_damaged_or_hand_edited_file_is_reported(home):
    config.path(home).write_text('{"hot_max": "many", "colour": "blue", "backup_keep": 3}')
    assert config.value("backup_keep", home) == 3 and config.value("hot_max", home) == 10
    problems = config.problems(home)
    assert any("hot_max = 'many' is not valid" in p for p in problems)
    assert any("unknown setting 'colour'" in p for p in problems)
    config.path(home).write_text("{not json")
    assert config.value("backup_keep", home) == 7
    assert any("cannot be read" in p for p in config.problems(home))
    check = config.settings_check(home)
    assert check["status"] == "warn" and "cannot be read" in check["detail"]


def test_the_lifecycle_reads_the_store_wide_values(home, monkeypatch):
    from mnemo.core.lifecycle import settings

    monkeypatch.delenv("MNEMO_HOT_MAX", raising=False)
    config.set_value(home, "hot_max", "4")
    assert settings(home).hot_max == 4


def test_mismatches_name_what_the_owner_does_not_apply_and_the_fix(home, monkeypatch):
    for name in ("MNEMO_HALF_LIFE_HOURS", "MNEMO_EMBEDDER", "MNEMO_MAX_TEXT_CHARS"):
        monkeypatch.delenv(name, raising=False)
    owner = {"pid": 42, "config": config.owner_view(home)}
    assert config.mismatches(owner) == []
    assert config.mismatches({"pid": 42}) == []  # an older owner says nothing: nothing to compare
    monkeypatch.setenv("MNEMO_HALF_LIFE_HOURS", "5")
    monkeypatch.setenv("MNEMO_EMBEDDER", "hash")
    monkeypatch.setenv("MNEMO_MAX_TEXT_CHARS", "50000")
    got = config.mismatches(owner)
    assert got[0].startswith("MNEMO_HALF_LIFE_HOURS=5 in this environment is not applied: the running owner "
                             "(pid 42) uses half_life_hours = 168; `mnemo config set half_life_hours 5`")
    assert "`mnemo config set embedder hash` stores it for every client (then `mnemo daemon stop`" in got[1]
    assert got[2].startswith("MNEMO_MAX_TEXT_CHARS in this environment is not applied: the running owner (pid 42) "
                             "was started without it")
    assert config.mismatches({"pid": 42, "config": config.owner_view(home)}) == []  # the same environment
