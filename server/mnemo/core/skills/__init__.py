"""Skills: read rule files of every tool in place, activate the right ones for (file, message), explain why.

Public API::

    registry = SkillRegistry(project_root, user_dir=None, extra_dirs=(), include_builtin=False)
    report = registry.load()                      # LoadReport(skills, problems, files_seen, shadowed)
    engine = SkillEngine(registry, embedder=None, config=ActivationConfig(), vector_cache=None)
    result = engine.activate(file_path, message, max_skills=None)   # ActivationResult (.to_dict())
    text = render_prompt_block(result, engine)   # "Active skills" Markdown block for agents
"""

from .activation import Activation, ActivationConfig, ActivationResult, SkillEngine, hold_key
from .model import FORMATS, LoadReport, Problem, Skill
from .prompt import render_prompt_block
from .registry import SkillRegistry, SkillSource, SkillWatcher, builtin_skills_dir, default_user_dir
from .sources import detect_format, read_skill_file

__all__ = [
    "FORMATS",
    "Activation",
    "ActivationConfig",
    "ActivationResult",
    "LoadReport",
    "Problem",
    "Skill",
    "SkillEngine",
    "SkillRegistry",
    "SkillSource",
    "SkillWatcher",
    "builtin_skills_dir",
    "default_user_dir",
    "hold_key",
    "detect_format",
    "read_skill_file",
    "render_prompt_block",
]
