"""The words of the conflict decision (core/relation/compare.py): stop words, negations, change markers, phrases and
synonyms folded to one form, the listed alternatives (tabs/spaces, pytest/unittest, ...), and `tokens`, which
splits a note into normalized tokens (words stemmed, identifiers, numbers and times of day in one form)."""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

from mnemo.core.text import _stem

STOP = frozenset("""a an the and or of to in on at by for from with as is are was were be been being it its this that
these those we our us you your they their he she i me my do does did done have has had can could would should will
shall so than then there here also just only very all any each every some such into onto via up out about over under
what when where which who whom why how if but yet s t""".split())
NEGATIONS = frozenset("not no never without none nor neither cannot avoid discourage forbid disallow nothing instead "
                      "rather outside nobody".split()  # "X instead of Y", "X rather than Y" deny Y; "outside" = "not in"
                      # words that say no by themselves: "logins are disabled" says what "logins are not accepted" says
                      + "disable disabled disables exclude excluded excludes excluding blocked blocks deny denied "
                        "denies reject rejected rejects prohibit prohibited forbidden disallowed refuse refused".split())
CHANGE_MARKERS = frozenset("moved switch switched migrated replaced deprecated gone dropped retired abandoned anymore "
                           "longer".split())
PREFER_VERBS = frozenset(["prefer", "favor", "favour", "choose", "pick"])
NUMBER_WORDS = {"zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
                "seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12",
                "thirteen": "13", "fourteen": "14", "fifteen": "15", "sixteen": "16", "eighteen": "18",
                "twenty": "20", "thirty": "30", "forty": "40", "fifty": "50", "sixty": "60", "ninety": "90",
                "hundred": "100", "thousand": "1000", "once": "1", "twice": "2",
                "single": "1", "double": "2"}
# Multi-word names and spellings folded to one token before anything else.
PHRASES = {
    "github actions": "github_actions", "gitlab ci": "gitlab_ci", "azure pipelines": "azure_pipelines",
    "secrets manager": "secrets_manager", "key vault": "key_vault", "new relic": "new_relic",
    "github pages": "github_pages", "cloudflare pages": "cloudflare_pages", "sql server": "mssql",
    "google cloud": "gcp", "local time": "local_time", "non-blocking": "nonblocking", "kebab-case": "kebab_case",
    "camel case": "camelcase", "snake case": "snake_case", "pascal case": "pascalcase", "pip-tools": "pip_tools",
    "no longer": "not longer", "out of": "outside", "instead of": "instead", "rather than": "rather", "postgresql": "postgres",
    "semantic versioning": "semver", "semantic versions": "semver", "semantic version": "semver",
    "mongodb": "mongo", "hashicorp vault": "vault", "aws secrets manager": "secrets_manager", "golang": "go", "k8s": "kubernetes", "node.js": "node", "nodejs": "node",
    "react testing library": "react_testing_library", "cloud run": "cloud_run", "app engine": "app_engine",
}
PHRASES.update({"no later than": "within", "no more than": "at most", "not more than": "at most",
                "no less than": "at least", "no fewer than": "at least", "not less than": "at least",
                "leave out": "exclude", "leaves out": "excludes", "left out": "excluded", "half an hour": "30 minutes", "half a minute": "30 seconds", "quarter of an hour": "15 minutes",
                "a quarter hour": "15 minutes", "half a day": "12 hours", "half a year": "6 months"})
_PHRASES_LONGEST_FIRST = sorted(PHRASES.items(), key=lambda kv: -len(kv[0]))
# compiled once: built per call, they kept falling out of `re`'s cache and were re-parsed for every note
_PHRASE_RES = [(re.compile(rf"(?<![\w-]){re.escape(phrase)}(?![\w-])"), rep) for phrase, rep in _PHRASES_LONGEST_FIRST]
# Any of them at all (as a substring: a pattern matches only where its phrase is): most notes hold none, and then
# the ~70 substitutions above change nothing (a substitution happens only where a phrase is in the text as it is),
# so they are skipped: the same tokens, at a fraction of the
# cost (the relation check tokenizes a new note and each of its ten neighbours; issue 22).
_PHRASE_STRINGS = tuple(phrase for phrase, _ in _PHRASES_LONGEST_FIRST)
_NOT_RE = re.compile(r"(\w)n['’]t\b")
_CANNOT_RE = re.compile(r"\bcan ?not\b", re.I)
_PREFER_RE = re.compile(r"\b((?:prefer|favou?r|choose|pick)\b[^,;]*?)\bover\b")
_NON_RE = re.compile(r"\bnon-(?=[a-z])")
_EMAIL_RE = re.compile(r"[\w.+-]+@[\w.-]+")
_DOTTED_RE = re.compile(r"\w\.\w")
_VERSION_RE = re.compile(r"v?\d+(?:[.:]\d+)*")
_NUMBER_TOKEN_RE = re.compile(r"v?\d+(?:[.:]\d+)*[a-z]*")
_NUMBER_PART_RE = re.compile(r"v?(\d+(?:[.:]\d+)*)")
_CLOCK_NUM_RE = re.compile(r"\d{1,2}:\d\d")
SYNONYMS = {"db": "database", "repo": "repository", "env": "environment", "config": "configuration",
            "deps": "dependency", "pr": "pull_request", "prs": "pull_request", "js": "javascript",
            "ts": "typescript", "py": "python", "k8s": "kubernetes", "msg": "message", "auth": "authentication",
            "dir": "directory", "folder": "directory", "id": "identifier", "ids": "identifier",
            "e2e": "end_to_end", "ci/cd": "ci", "uuidv4": "uuid", "semver": "semantic_version"}

# Groups of mutually exclusive choices for one slot: saying one where the other note says another is a contradiction.
ALTERNATIVES: tuple[frozenset[str], ...] = tuple(frozenset(g.split()) for g in (
    # opposites
    "tab space", "sync async synchronous asynchronous blocking nonblocking", "enable disable", "public private",
    "ascending descending asc desc", "required optional mandatory", "before after", "single double",
    "camelcase snake_case kebab_case pascalcase", "utc local_time", "stateless stateful", "allow deny forbid block",
    "must may", "min max minimum maximum", "upper lower uppercase lowercase", "first last",
    "increase decrease", "include exclude", "accept reject", "true false", "eager lazy", "mutable immutable",
    "strict loose lenient", "allowlist denylist whitelist blacklist", "rebase merge squash", "http https", "tcp udp",
    "get post put patch delete", "light dark", "monorepo polyrepo", "horizontal vertical", "inline external",
    # tools for the same job
    "pytest unittest nose nose2 ward", "jest mocha vitest jasmine ava",
    "cypress playwright selenium puppeteer webdriverio testcafe", "black autopep8 yapf ruff blue",
    "ruff flake8 pylint pyflakes", "eslint tslint biome standard rome", "prettier biome dprint",
    "pip poetry pipenv uv conda pdm hatch pip_tools rye", "npm yarn pnpm bun",
    "jenkins github_actions gitlab_ci circleci travis buildkite teamcity drone azure_pipelines bamboo",
    "redis memcached valkey keydb dragonfly",
    "postgres mysql mariadb sqlite oracle mssql cockroachdb aurora mongo dynamodb couchdb cassandra firestore",
    "snowflake bigquery redshift databricks clickhouse synapse duckdb",
    "kafka rabbitmq sqs nats pulsar kinesis activemq pubsub",
    "celery rq dramatiq huey sidekiq resque bullmq arq", "webpack vite rollup parcel esbuild turbopack browserify",
    "sentry rollbar bugsnag honeybadger airbrake", "datadog new_relic dynatrace appdynamics",
    "elasticsearch opensearch solr algolia meilisearch typesense", "elasticsearch loki splunk papertrail cloudwatch",
    "terraform pulumi cloudformation cdk opentofu", "vercel netlify heroku render fly cloudflare_pages",
    "vault secrets_manager doppler sops key_vault 1password", "react vue angular svelte solid ember preact",
    "redux zustand mobx recoil jotai pinia", "django flask fastapi starlette pyramid tornado sanic",
    "sqlalchemy peewee tortoise sqlmodel prisma typeorm sequelize",
    "python go rust java kotlin ruby php scala elixir", "javascript typescript",
    "kubernetes nomad ecs swarm", "requests httpx aiohttp urllib3", "mypy pyright pyre pytype",
    "alembic flyway liquibase", "launchdarkly unleash flagsmith growthbook configcat",
    "sendgrid mailgun ses postmark sparkpost", "auth0 okta cognito keycloak clerk", "github gitlab bitbucket",
    "pagerduty opsgenie", "aws gcp azure", "main master develop trunk", "grpc rest graphql thrift soap",
    "json yaml toml xml protobuf avro msgpack", "istio linkerd consul", "jaeger zipkin tempo",
    "crowdin lokalise transifex", "dependabot renovate", "helm kustomize jsonnet", "sphinx mkdocs docusaurus",
    "nginx apache caddy traefik haproxy envoy", "argon2 argon2id bcrypt scrypt pbkdf2", "rs256 hs256 es256",
    "ubuntu debian alpine centos fedora", "docker podman", "make just task", "zod yup joi ajv valibot superstruct",
    "pydantic marshmallow cerberus",
))
_ALT_INDEX: dict[str, set[int]] = {}
for _i, _g in enumerate(ALTERNATIVES):
    for _w in _g:
        _ALT_INDEX.setdefault(_w, set()).add(_i)

_TOKEN_RE = re.compile(
    r"`[^`]+`"  # a code span: one identifier
    r"|[\w.+-]+@[\w-]+(?:\.[\w-]+)+"  # an email address
    r"|https?://[^\s,;]+"  # a URL
    r"|[#@][\w][\w./-]*"  # a channel, a scoped package
    r"|--?[a-z][\w-]*"  # a flag
    r"|v?\d+(?:[.:]\d+)*(?:[a-z]+)?"  # a number, a version, a time (2, 3.11, v1.4.2, 02:00, 30s)
    r"|[\w-]*[/\\][\w./\\<>-]*"  # a path
    r"|[a-z_][\w-]*(?:\.[a-z_]\w*)*(?:\(\))?"  # a word, a dotted name, a call
    r"|,",  # a clause break (see _split_clauses)
    re.I)


class Token(NamedTuple):
    """One token of a note (immutable: parsed notes are cached and shared). A tuple, which is quicker to make than a
    frozen dataclass: a write parses each of its ten neighbours (issue 22, fourth pass)."""
    raw: str  # as written (for masking)
    norm: str  # normalized (stemmed, synonyms folded)
    kind: str  # word | number | ident | stop


@functools.lru_cache(maxsize=65536)
def _norm_word(w: str) -> str:
    """A word's normalized form (lower case, synonyms and number words folded, stemmed); cached: a pure function
    of the word, asked for every word of every note compared."""
    w = w.lower().strip("'’")
    w = SYNONYMS.get(w, w)
    if w in NUMBER_WORDS:
        return NUMBER_WORDS[w]
    if w in _ALT_INDEX or "_" in w:
        return w
    s = _stem(w)
    return s if s in _ALT_INDEX else _STEM_FIX.get(s) or _alt_stems().get(s, s)  # "merges" -> "merge"


# Stems whose alternative-group spelling differs from the word (enabled -> enabl -> enable).
_STEM_FIX = {"enabl": "enable", "disabl": "disable", "synchron": "synchronous", "asynchron": "asynchronous",
             "ascend": "ascending", "descend": "descending", "requir": "required", "option": "optional",
             "mandatori": "mandatory", "stateless": "stateless", "immut": "immutable", "mutabl": "mutable",
             "uppercas": "uppercase", "lowercas": "lowercase", "increas": "increase", "decreas": "decrease",
             "includ": "include", "exclud": "exclude", "privat": "private", "singl": "single", "doubl": "double",
             "discourag": "discourage", "forbidden": "forbid", "disallow": "disallow", "minimum": "minimum",
             "maximum": "maximum", "rebas": "rebase", "lazili": "lazy", "eager": "eager"}


_CLOCK_RE = re.compile(r"\b(\d{1,2})(?::(\d\d))?\s*([ap])\.?m\b\.?")


def _clock(m: re.Match) -> str:
    hour = int(m.group(1)) % 12 + (12 if m.group(3) == "p" else 0)
    return f"{hour}:{m.group(2) or '00'}"


@functools.cache
def _alt_stems() -> dict[str, str]:
    """The listed alternatives by their stem, so that every form of one reads as the listed word."""
    return {_stem(w): w for w in sorted(_ALT_INDEX) if "_" not in w and _stem(w) != w}


def tokens(text: str) -> list[Token]:
    # each substitution only where its literal part is in the text (most notes hold none): the same tokens
    t = _NOT_RE.sub(r"\1 not", text) if "'" in text or "’" in text else text  # don't -> do not, isn't -> is not
    t = _CANNOT_RE.sub("can not", t)
    low = t.lower()
    if any(phrase in low for phrase in _PHRASE_STRINGS):
        for pattern, rep in _PHRASE_RES:
            low = pattern.sub(rep, low)
    if "over" in low:
        low = _PREFER_RE.sub(r"\1instead", low)
    if "non-" in low:
        low = _NON_RE.sub("not ", low)  # "a non-root user" says "not root"
    low = _CLOCK_RE.sub(_clock, low)  # "3 am" / "3:00 pm" -> "3:00" / "15:00"
    # a new Token per occurrence (`compare._before` finds a token by identity), its reading cached per spelling
    return [Token(raw, *_read(raw)) for raw in _TOKEN_RE.findall(low)]


@functools.lru_cache(maxsize=65536)
def _read(raw: str) -> tuple[str, str]:
    """(norm, kind) of one token as `_TOKEN_RE` found it: a pure function of its spelling, cached (a note's words
    recur across the notes a write compares)."""
    if raw == ",":
        return ",", "stop"
    if raw.startswith("`") or raw.startswith(("http://", "https://", "#", "@", "-")) or "/" in raw \
            or _EMAIL_RE.fullmatch(raw) \
            or "\\" in raw or _DOTTED_RE.search(raw) and not _VERSION_RE.fullmatch(raw) \
            or raw.endswith("()"):
        return raw.strip("`").rstrip(".,;:"), "ident"
    if _NUMBER_TOKEN_RE.fullmatch(raw):
        part = _NUMBER_PART_RE.match(raw)
        assert part is not None  # the token pattern starts with the part pattern: a full match implies this one
        num = part.group(1)
        if _CLOCK_NUM_RE.fullmatch(num):  # a time of day: "03:00" is "3:00"
            num = f"{int(num[:-3])}:{num[-2:]}"
        return num, "number"
    if raw in STOP:
        return raw, "stop"
    if raw in NEGATIONS:  # as written: "discourage" and "outside" are negations, their stems are not
        return raw, "word"
    n = _norm_word(raw.replace("-", "_") if raw.replace("-", "_") in _ALT_INDEX else raw)
    return n, "number" if n.isdigit() else "word"
