"""Learning from corrections: lasting corrections and stated preferences in what a person types to an agent.

"no, use pnpm, not npm", "always run ruff before committing", "don't mock the database in these tests" are
knowledge that should outlive the session; "don't worry about the tests for now", "no, I meant the other file" or
"use a set instead of a list here" steer this one turn and must not be filed. No language model: each sentence of
the prompt gets a few pattern features (a correction's lead, rule words like always/never/from now on, a stated
preference, a convention ("we use", "in this repo"), an "X, not Y" alternative, one-off words like "for now" or
"this time", a pointer at one spot ("here", "line 12"), a question, a complaint about an outcome, a tool swap
between two known tools) and one embedding feature (`knn`: the sentence's mean MiniLM cosine to its 5 nearest
labeled examples of lasting rules minus that to its 5 nearest other sentences, from the tune split), and a
small logistic model turns them into the probability that the sentence states a lasting rule. The coefficients and
the threshold are fit on the tune split of `bench/data/corrections.jsonl` (`bench/corrections.py --write`).

What is detected is filed as a memory of kind `feedback` (type `user` when it is about the person and how they
work, `project` when it is about the code and its tools), with the prompt as provenance, pending in Review unless
the caller's `learn` setting is `auto`. The write path's dedup turns the same correction stated again into
"confirmed Nx".
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mnemo.core.api_types.results import RememberResult
from mnemo.core.errors import InvalidInput
from mnemo.core.memory.write import confirm, remember
from mnemo.core.relation import compare as relation

if TYPE_CHECKING:
    from mnemo.core.engine import Engine
    from mnemo.core.models import Context

LEARN_MODES = ("off", "confirm", "auto")
LEARN_ENV = "MNEMO_LEARN_CORRECTIONS"
MAX_PROMPT_CHARS = 4000          # longer prompts are pasted logs or specs, not corrections: only the start is read
MAX_SENTENCES = 12
MAX_MEMORY_CHARS = 300
PROVENANCE_PROMPT_CHARS = 1000

FEATURES = ("lead_no", "habit", "rule", "prefer", "convention", "alternative", "tool_swap", "negated", "one_off",
            "deictic", "instance", "question", "outcome", "task", "behavior", "task_clause", "knn")

# --- fitted: begin (written by `python bench/corrections.py --write`) ---
FITTED_MODEL: dict[str, float] = {
    "intercept": 1.0897, "lead_no": 0.7433, "habit": 0.7484, "rule": 0.94, "prefer": 0.3716,
    "convention": 0.6797, "alternative": -0.3278, "tool_swap": 1.0975, "negated": -0.8737, "one_off": -1.7854,
    "deictic": -2.1092, "instance": -1.4888, "question": -3.1411, "outcome": -2.4147, "task": -2.5079,
    "behavior": -2.5896, "task_clause": -0.6253, "knn": 6.9694,
}
FITTED_THRESHOLD = 0.8153
# --- fitted: end ---

_W = r"(?:^|(?<=[\s,;:(\"'-]))"          # a word start inside a sentence
# Corrections of what the agent just did: "no, ...", "wrong", "I told you", "you used ..."
_LEAD_NO = re.compile(
    r"^\s*(?:no+\b|nope\b|nah\b|wrong\b|not like that\b|not \w+\.|that'?s (?:wrong|not|incorrect)|that is (?:wrong|not)"
    r"|incorrect\b|actually\b|ugh\b|again\b|stop\b|i (?:said|told you)|you (?:keep|used|ran|put|shouldn'?t|should not)"
    r"|hmm,? no\b|no no\b|wrong again)", re.I)
# A habit being corrected: "stop adding ...", "you keep ...", "again", "I told you"
_HABIT = re.compile(
    r"\b(?:stop \w+ing|you keep|keep \w+ing|again\b|i (?:said|told you)|how many times|every time you)", re.I)
# Rule words: the statement holds beyond this turn
_RULE = re.compile(
    _W + r"(?:always|never|every time|each time|any ?time|whenever|from now on|going forward|in (?:the )?future"
    r"|for future reference|for the record|by default|in general|generally|as a rule|the rule here|make it a habit"
    r"|remember(?: that|:)|when(?:ever)? you\b|even (?:if|when)|when in doubt|per (?:pr|file|commit|request|module"
    r"|component|class|test)\b|every (?:new |pr\b|migration|endpoint|time)|all new|each (?:new )?\w+ (?:must|needs|gets)"
    r"|only\b|must\b|needs? (?:a|an|to)\b|should always)", re.I)
_PREFER = re.compile(
    r"\b(?:i (?:prefer|like|love|hate|want|don'?t like|don'?t want|'d rather|would rather|'d like|'d prefer)"
    r"|i'?d rather|my preference|we prefer|we like|prefer\b|rather than|how we like it|please keep)", re.I)
_CONVENTION = re.compile(
    r"\b(?:we (?:use|don'?t|do not|never|always|prefer|write|pin|rebase|branch|deploy|manage|store|raise|hit|"
    r"switched|only|like|return|name)|our (?:\w+ )?(?:config|convention|ci|tests?|code|style|frontend|backend)"
    r"|(?:the|our) convention|in this (?:repo|codebase|project)|in our \w+|in these tests|this codebase|everywhere"
    r"|like the others|like everywhere else|that'?s how we|(?:\w+ )?here is\b)", re.I)
# "X, not Y" / "instead of" / "no longer": one thing in place of another
_ALTERNATIVE = re.compile(
    r"(?:,|;|-|—)\s*not\s+[\w.@/-]+|\bnot\s+[\w.@/-]+\s*[.,;]\s*\w+|\binstead of\b|\brather than\b|\bover\b\s+\w+"
    r"|\b\w+ only\b|\bonly \w+\b|\bnot \w+\b(?=[^?]*$)|\bno longer\b|\banymore\b|\bswitched to\b|\bit'?s \w+ now\b",
    re.I)
# Tools, libraries and formats a team standardizes on: "X, not Y" between two of them is a lasting choice.
TOOLS = frozenset("""
npm pnpm yarn bun deno node nvm uv pip pipx poetry pdm conda hatch rye virtualenv venv setuptools tox nox make
cmake bazel gradle maven cargo go gofmt rustfmt clippy black ruff flake8 pylint isort mypy pyright pytest unittest
nose jest vitest mocha jasmine cypress playwright selenium karma eslint prettier tslint biome stylelint webpack vite
rollup esbuild parcel turbo nx lerna docker podman compose kubernetes kubectl helm terraform ansible pulumi
requests httpx aiohttp urllib3 axios fetch ky got lodash underscore ramda moment dayjs date-fns luxon redux mobx
zustand recoil react vue svelte angular jquery nextjs next nuxt express fastapi flask django starlette sanic
sqlalchemy peewee prisma typeorm sequelize knex drizzle alembic postgres postgresql mysql sqlite mongodb redis
celery rq kafka rabbitmq graphql rest grpc protobuf json yaml toml ini xml csv tabs spaces camelcase snake_case
kebab-case pascalcase typescript javascript python ruby java kotlin scala rust golang bash zsh sh powershell
git svn github gitlab bitbucket circleci jenkins travis actions squash rebase merge main master develop trunk
structlog loguru logging print console.log pydantic attrs dataclasses marshmallow zod yup joi respx responses
mock mocks fixtures factories factory_boy hypothesis vcr sinon msw nock stdout stderr utc localtime
""".split())
_TOOL_SWAP = re.compile(r"\b([\w.+#-]+)\s*(?:,|;|-|—|\.)?\s*not\s+([\w.+#-]+)|\binstead of\s+([\w.+#-]+)"
                        r"|\bnot\s+([\w.+#-]+)\s*[.,;]\s*([\w.+#-]+)|\b([\w.+#-]+)\s+(?:over|rather than)\s+([\w.+#-]+)",
                        re.I)
# One incident rather than a standing rule: "the failing test is ...", "the file is in ...", "the bug is ..."
_INSTANCE = re.compile(
    r"\bthe (?:failing |broken |other |old |new |first |second |last )?(?:file|bug|error|test|problem|issue|crash"
    r"|ticket|port|value|total|number|button|stack trace|job|pipeline|pr|commit|items?|rest)\b(?!s)", re.I)
_NEGATED = re.compile(r"^\s*(?:please\s+)?(?:don'?t|do not|never|stop|avoid|no more)\b", re.I)
# One-off scope: this turn, this change, later, or "whatever works"
_ONE_OFF = re.compile(
    r"\b(?:for now|this time|this run|this once|just this once|today|yet\b|at the moment|for the moment|temporarily"
    r"|right now|(?:for|in|on) (?:this|that|the current) (?:pr|commit|migration|endpoint|test|fix|branch|benchmark"
    r"|change|release|run|file|function|ticket|task|page|one|prototype|script|sprint|particular \w+)\b|this week"
    r"|next (?:week|quarter|sprint|pr)|throwaway|prototype|later\b|i'?ll (?:do|fix|write|ask)|we'?ll\b"
    r"|let'?s (?:wait|do|keep)|first (?:finish|do|fix)|until\b|never mind|nevermind|don'?t worry|don'?t bother"
    r"|no need\b|no hurry|not now|just (?:explain|do|use|give)|undo|revert|whatever|either (?:is|way)|up to you"
    r"|feel free|doesn'?t matter|you can use|in a hurry)", re.I)
# A pointer at one spot or thing in front of us: "here", "this function", "line 12", "it should be ..."
_DEICTIC = re.compile(
    r"(?<!everywhere )(?<!like it )\bhere\b(?! is\b)|\b(?:this|that) (?:[\w-]+ )?(?:function|method|class|variable"
    r"|line|file|one|button|page|endpoint|change|pr|commit|diff|test|message|table|list|fixture|import|ticket|module"
    r"|version|option|approach|layout|design|error|call|script|value|query|loop|field)\b|line \d+"
    r"|the one (?:below|above)|the (?:second|first|left|right|other) (?:option|approach|one|file|test|branch)"
    r"|\b(?:that|this|it) (?:should(?:n'?t)?|must|needs to) be\b|\b(?:fix(?:ing)?|mov(?:e|ing)|delet(?:e|ing)"
    r"|renam(?:e|ing)|chang(?:e|ing)|wrap|sort|restore|keep|leave|merge|push|format) (?:it|them)\b"
    r"|on the (?:left|right)|wrong (?:file|path|ticket|repo|branch)|you forgot|you missed|misspelled|you misread",
    re.I)
_QUESTION = re.compile(
    r"\?\s*$|^\s*(?:why|what|how|where|which|who|is|are|do|does|did|can|could|should|would|any idea)\b(?!.*\b(?:always"
    r"|never)\b)", re.I)
# "always"/"never" said of what the code does ("the job always retries", "users should never see ..."): a
# requirement for this change, not a rule for the agent (unless "you", "we" or "I" is the subject).
_BEHAVIOR = re.compile(
    r"^(?!.*\b(?:you|we|i)\b.*\b(?:always|never)\b)(?:(?:the|this|that|users?|it|each|every|new|all)\s+)?"
    r"(?:[\w-]+\s+){0,3}(?:should\s+|must\s+|will\s+|can\s+)?(?:always|never)\b"
    r"(?!\s+(?:use|run|write|do|add|push|commit))", re.I)
# a task clause after a comma ("..., add a setting for it"): the sentence asks for a change now
_TASK_CLAUSE = re.compile(
    r"[,;:]\s*(?:please\s+|so\s+|just\s+)?(?:add|write|catch|clamp|fix|make|put|create|implement|check|double check"
    r"|rerun|list|update|remove|look|tell|give|do|move|continue|go on|carry on|proceed|sort|wrap|restore|pin"
    r"|prepare|return|only change)\b", re.I)
_OUTCOME = re.compile(
    r"\b(?:still (?:fail|there|broken|the same)|didn'?t (?:fix|work)|doesn'?t work|same error|not what i expected"
    r"|the error|the test still|look again|crash|it was fine|is slow|is red|is down|is broken)", re.I)
_TASK = re.compile(
    r"^\s*(?:please\s+|can you\s+|ok,?\s+|now\s+|let'?s\s+)?(?:add|write|implement|fix|create|make|update|refactor|"
    r"rename|move|extract|convert|port|generate|set|increase|optimize|delete|remove|upgrade|bump|hook|wire|show|"
    r"support|cache|translate|continue|run|push|revert|squash|format|clean|profile|replace|split|configure|"
    r"document|kill|mock|switch|skip|use (?:a|await|the second)\b)(?!\s+(?:sure you|it a habit))", re.I)

# A conversational lead-in ("no, ", "actually ", "I told you, "), dropped from the learned note. A bare "no" is a
# lead-in only as an interjection: before punctuation, the end, another "no", or the start of a clause ("no we use
# ...", "no don't ..."). Before a noun or "need"/"more" it is the rule itself ("no need to explain", "no docker
# compose v1 syntax", "no more lodash") and stays, or the note would say the opposite of what the person said.
_NO_CLAUSE = (r"(?:we|i|you|it|that|this|the|they|please|just|use|don'?t|do|never|stop|not|always|wait|actually"
              r"|again|put|keep|make|ask|let'?s|leave|go)\b")
_LEAD_STRIP = re.compile(
    r"^\s*(?:(?:(?:nope|nah|hmm+|ugh|ok(?:ay)?|so|wait|well|actually|again|wrong again|wrong|that'?s wrong"
    r"|that'?s incorrect|that'?s not right|not like that|i said|i told you(?: before)?|for future reference"
    r"|remember(?: that)?|my preference|also)\b|no+\b(?=\s*(?:[,:;.!\-—–]|$)|\s+no+\b|\s+" + _NO_CLAUSE + r"))"
    r"\s*[,:;.!\-—–]*\s*)+", re.I)
_USER_CUES = re.compile(
    r"\b(?:i (?:prefer|like|love|hate|want|don'?t like|don'?t want|'d rather|'d like)|my preference|ask me|show me|"
    r"tell me|remind me|answer|answers|reply|apologi[sz]|explain|essay|emoji|summary|mention|in english|verbose)\b",
    re.I)
_PROJECT_CUES = re.compile(
    r"\b(?:we|our|in this (?:repo|codebase|project)|here|tests?|ci|repo|codebase|api|endpoint|database|db|"
    r"migrations?|docker|deploy|branch(?:es)?|commits?|lint|ruff|pnpm|npm|yarn|python|typescript|schema)\b", re.I)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Za-z\"'(])|\n+|(?<=\.\.\.)\s*(?=[A-Za-z\"'(])")


@dataclass
class Correction:
    """A sentence of a prompt that states a lasting rule, and the memory it becomes."""

    sentence: str
    text: str                       # the memory text: the sentence without its lead ("no, ...") and tidied
    type: str                       # user | project
    score: float                    # probability that the sentence states a lasting rule
    signals: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"sentence": self.sentence, "text": self.text, "type": self.type, "score": round(self.score, 4),
                "signals": {k: round(v, 4) for k, v in self.signals.items() if v}}


def learn_mode(value: str | None) -> str:
    """The caller's learn setting (`MNEMO_LEARN_CORRECTIONS`, request-shaped): off | confirm | auto. Default confirm:
    what is learned waits in Review until a person accepts it. A bad value is refused, naming the variable."""
    mode = (value or "confirm").strip().lower()
    if mode not in LEARN_MODES:
        raise InvalidInput(f"learn setting {value!r} is not one of {', '.join(LEARN_MODES)}; nothing was learned",
                           hint=f"fix {LEARN_ENV} (off, confirm or auto) or the --learn option")
    return mode


def sentences(prompt: str) -> list[str]:
    """The prompt's sentences; a short prompt split into fragments ("not yarn. pnpm. every time.") also as a whole."""
    text = (prompt or "")[:MAX_PROMPT_CHARS]
    parts = [p.strip() for p in _SENTENCE.split(text)]
    out = [p for p in parts if p and re.search(r"[A-Za-z]", p)][:MAX_SENTENCES]
    if len(out) > 1 and len(re.findall(r"[\w'-]+", text)) <= 12 and any(len(p.split()) <= 3 for p in out):
        out.append(re.sub(r"\s+", " ", text.strip()))
    return out


def pattern_features(sentence: str) -> dict[str, float]:
    s = sentence.strip()
    words = re.findall(r"[\w'-]+", s)
    rule = _RULE.search(s) is not None
    return {
        "lead_no": float(_LEAD_NO.search(s) is not None),
        "habit": float(_HABIT.search(s) is not None),
        "rule": float(rule),
        "prefer": float(_PREFER.search(s) is not None),
        "convention": float(_CONVENTION.search(s) is not None),
        "alternative": float(_ALTERNATIVE.search(s) is not None),
        "tool_swap": float(_tool_swap(s)),
        "negated": float(_NEGATED.search(s) is not None),
        "instance": float(_INSTANCE.search(s) is not None),
        "one_off": float(_ONE_OFF.search(s) is not None),
        "deictic": float(_DEICTIC.search(s) is not None),
        "question": float(_QUESTION.search(s) is not None),
        "outcome": float(_OUTCOME.search(s) is not None),
        "task": float(_TASK.search(s) is not None),
        "behavior": float(_BEHAVIOR.search(s) is not None and not re.match(r"\s*(?:we|you|i|please|always|never)\b",
                                                                          s, re.I)),
        "task_clause": float(_TASK_CLAUSE.search(s) is not None),
        "short": float(len(words) <= 3),
    }


def _tool_swap(sentence: str) -> bool:
    for m in _TOOL_SWAP.finditer(sentence):
        words = {w.lower().strip(".,;") for w in m.groups() if w}
        if words & TOOLS:
            return True
    return False


def candidate(feats: dict[str, float]) -> bool:
    """Only a sentence with some sign of a rule, a preference or a correction is scored (and embedded)."""
    return not feats["short"] and bool(feats["lead_no"] or feats["habit"] or feats["rule"] or feats["prefer"]
                                       or feats["convention"] or feats["alternative"] or feats["negated"])


KNN_K = 5
EXAMPLES_FILE = Path(__file__).with_name("corrections_examples.json")


def knn_feature(vecs, ex_vecs, ex_labels, k: int = KNN_K):
    """The embedding feature: mean cosine to the k nearest labeled examples of lasting rules minus the mean cosine
    to the k nearest other sentences (the tune split's candidate sentences, `corrections_examples.json`)."""
    import numpy as np

    sim = np.asarray(vecs, dtype=np.float32) @ np.asarray(ex_vecs, dtype=np.float32).T
    lab = np.asarray(ex_labels)
    pos = np.sort(np.where(lab[None, :] == 1, sim, -1.0), axis=1)[:, -k:].mean(axis=1)
    neg = np.sort(np.where(lab[None, :] == 0, sim, -1.0), axis=1)[:, -k:].mean(axis=1)
    return pos - neg


class _Examples:
    """The labeled example sentences, embedded once per embedder (about a second; `warm` does it in advance)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: str | None = None
        self.vectors = self.labels = None

    def load(self, embedder):
        import numpy as np

        key = getattr(embedder, "model_id", None) or type(embedder).__name__
        with self._lock:
            if self._key != key:
                try:
                    data = json.loads(EXAMPLES_FILE.read_text(encoding="utf-8"))
                    texts = [e["text"] for e in data["examples"]]
                    labels = [int(e["label"]) for e in data["examples"]]
                except (OSError, ValueError, KeyError, TypeError):
                    texts, labels = [], []
                self.vectors = np.asarray(embedder.embed(texts), dtype=np.float32) if texts else None
                self.labels = np.asarray(labels)
                self._key = key
            return self.vectors, self.labels


_EXAMPLES = _Examples()


def warm(embedder) -> None:
    """Embed the example sentences now (the owner calls this in the background at a session's start)."""
    _EXAMPLES.load(embedder)


def probability(feats: dict[str, float], model: dict[str, float] | None = None) -> float:
    m = model or FITTED_MODEL
    z = m.get("intercept", 0.0) + sum(m.get(k, 0.0) * feats.get(k, 0.0) for k in FEATURES)
    return 1.0 / (1.0 + math.exp(-max(-40.0, min(40.0, z))))


def memory_text(sentence: str) -> str:
    """The sentence as a memory: its conversational lead-in ("no, ", "actually ") dropped, capitalized, ending
    with a full stop. The person's words otherwise, negations included: "no need to explain, just show the diff"
    is learned as "No need to explain, just show the diff.", never as its opposite."""
    s = _LEAD_STRIP.sub("", sentence.strip()).strip(" -—,;:")
    s = re.sub(r"\s+", " ", s)
    if not s:
        s = sentence.strip()
    if len(s) > MAX_MEMORY_CHARS:
        s = s[: MAX_MEMORY_CHARS - 1].rsplit(" ", 1)[0] + "…"
    s = s[0].upper() + s[1:]
    return s if s[-1] in ".!?…" else s + "."


def memory_type(sentence: str) -> str:
    """`user` when the sentence is about the person (how they like answers, what they want asked), else `project`."""
    user = len(_USER_CUES.findall(sentence))
    project = len(_PROJECT_CUES.findall(sentence))
    return "user" if user > project else "project"


def score_sentences(prompt: str, embedder=None, model: dict[str, float] | None = None
                    ) -> list[tuple[str, dict[str, float], float]]:
    """Every sentence with its features and probability (0 for sentences that are not candidates)."""
    sents = sentences(prompt)
    feats = [pattern_features(s) for s in sents]
    cand = [i for i, f in enumerate(feats) if candidate(f)]
    if embedder is not None and cand:
        ex_vecs, ex_labels = _EXAMPLES.load(embedder)
        if ex_vecs is not None and len(ex_vecs):
            knn = knn_feature(embedder.embed([sents[i] for i in cand]), ex_vecs, ex_labels)
            for i, d in zip(cand, knn, strict=True):
                feats[i]["knn"] = float(d)
    out = []
    for i, (s, f) in enumerate(zip(sents, feats, strict=True)):
        f.setdefault("knn", 0.0)
        out.append((s, f, probability(f, model) if i in cand else 0.0))
    return out


def detect(prompt: str, embedder=None, model: dict[str, float] | None = None,
           threshold: float | None = None) -> list[Correction]:
    """The lasting corrections and preferences stated in a prompt (most likely first)."""
    if not isinstance(prompt, str) or not prompt.strip():
        return []
    t = FITTED_THRESHOLD if threshold is None else threshold
    found = [Correction(s, memory_text(s), memory_type(s), p, f)
             for s, f, p in score_sentences(prompt, embedder, model) if p >= t]
    return sorted(found, key=lambda c: -c.score)


SAME_CLAIM_COSINE = 0.80        # a learned note this close to an earlier one (and the same claim) confirms it


def _canonical(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def same_learned(engine: Engine, ctx: Context, text: str, type_: str) -> Any:
    """An earlier learned correction (pending or active, in this project) that states the same thing: the same
    words, or a paraphrase the conflict detector calls the same claim (core/relation/compare.py)."""
    import numpy as np

    rows = [m for m in engine.store.learned_feedback(ctx.project_id) if m.type == type_]
    if not rows:
        return None
    canon = _canonical(text)
    for m in rows:
        if _canonical(m.text) == canon:
            return m
    vecs = np.asarray(engine.embed([text] + [m.text for m in rows]), dtype=np.float32)
    sims = vecs[1:] @ vecs[0]
    close = [(m, float(s)) for m, s in zip(rows, sims, strict=True) if s >= SAME_CLAIM_COSINE]
    if not close:
        return None
    close.sort(key=lambda ms: -ms[1])
    decisions = relation.decide_many([(m.text, text, sim) for m, sim in close], engine.embed,
                                     relation.vocabulary_of(engine.embedder))
    for (m, _sim), d in zip(close, decisions, strict=True):
        if d.relation == "duplicate":
            return m
    return None


def _confirm(engine: Engine, mem: Any, prov: dict[str, Any]) -> RememberResult:
    """One more confirmation of an earlier learned correction; the new prompt joins its provenance (last 5)."""
    again = [*((mem.provenance or {}).get("confirmed_by") or []), prov["learned_from"]][-5:]
    with engine.store.write() as c:
        confirm(c, engine.store, mem.id, 0.7, time.time())
        engine.store.update_memory(c, mem.id, provenance={**(mem.provenance or {}), "confirmed_by": again})
    engine.changed()
    m = engine.store.record(mem.id)
    return {"status": "confirmed", "memory": m, "message": f"already known: confirmed {m['confirmations']}x",
            "conflicts": []}


def learn(engine: Engine, ctx: Context, prompt: str, mode: str, *, session: str | None = None) -> list[dict[str, Any]]:
    """File what `detect` finds as `feedback` memories: pending in Review (`confirm`) or active (`auto`), with the
    prompt as provenance. The same correction again, in the same or other words, is one more confirmation of the
    first ("confirmed Nx"), never a copy."""
    mode = learn_mode(mode)
    if mode == "off":
        return []
    out = []
    for c in detect(prompt, engine.embedder)[:3]:
        prov = {"learned_from": {"prompt": prompt[:PROVENANCE_PROMPT_CHARS], "sentence": c.sentence,
                                 "score": round(c.score, 4), "detector": "corrections", "mode": mode,
                                 **({"session": session[:200]} if session else {})}}
        earlier = same_learned(engine, ctx, c.text, c.type)
        if earlier is not None:
            res = _confirm(engine, earlier, prov)
        else:
            res = remember(engine, ctx, c.text, type=c.type, kind="feedback", tags=["learned"], importance=0.7,
                           source="agent", status="active" if mode == "auto" else "pending", provenance=prov)
        mem = res.get("memory") or {}
        out.append({**c.to_dict(), "status": res.get("status"), "id": mem.get("id"),
                    "confirmations": mem.get("confirmations", 1), "memory_status": mem.get("status"),
                    "message": res.get("message")})
    return out


__all__ = ["FEATURES", "FITTED_MODEL", "FITTED_THRESHOLD", "LEARN_ENV", "LEARN_MODES", "Correction", "detect",
           "learn", "learn_mode", "memory_text", "memory_type", "pattern_features", "score_sentences", "sentences"]
