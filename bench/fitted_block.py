"""Writes a fitted model into the source module that ships it: the `FITTED_MODEL` dict and `FITTED_THRESHOLD`
block (bench/fit_activation.py -> core/skills/activation.py, bench/corrections.py -> core/agent/corrections.py)."""

from __future__ import annotations

import re
from pathlib import Path

BLOCK = re.compile(r"FITTED_MODEL: dict\[str, float\] = \{.*?\}\nFITTED_THRESHOLD = [0-9.]+\n", re.DOTALL)


def write_fitted_block(module: Path, model: dict[str, float], threshold: float) -> None:
    """Replace the fitted block of `module` (wrapped at 112 columns); stop if the module has none."""
    lines, line = [], "   "
    for it in (f'"{k}": {v}' for k, v in model.items()):
        if len(line) + len(it) + 2 > 112:
            lines.append(line.rstrip())
            line = "   "
        line += f" {it},"
    lines.append(line.rstrip())
    block = "FITTED_MODEL: dict[str, float] = {\n" + "\n".join(lines) + "\n}\n" + f"FITTED_THRESHOLD = {threshold}\n"
    src = module.read_text(encoding="utf-8")
    new = BLOCK.sub(lambda _: block, src)
    if new == src and block not in src:
        raise SystemExit(f"could not find the fitted block in {module}")
    module.write_text(new, encoding="utf-8")
