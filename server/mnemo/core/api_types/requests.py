"""The options of a request, declared once: each field's type, default and help text, and the surfaces that offer
it. `remember`'s options (`RememberOptions`) are the fields of a note (`NoteFields`, also what one item of a
`remember_batch` holds) and of its write (`DraftOptions`), and the conflict policy. Everything else is derived:

- `mnemo.api.Service.remember` takes them as `**options: Unpack[RememberOptions]` (the type checker checks every
  call); `mnemo.api.signature` expands them into keyword parameters with these defaults (the client's and the
  owner's argument check, `accepted`), and `LocalService` and the core pass them through (`filled`);
- the CLI's options (`mnemo.cli.options.add_options`: every field offered on "cli", its help and default);
- the MCP tool's input schema (`mnemo.mcp.tools`: every field offered on "mcp", its description, default,
  bounds and choices).

tests/unit/test_request_declaration.py checks that the surfaces cannot drift from this declaration.

No `from __future__ import annotations` here: the fields' `Annotated` metadata is read at run time.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import (
    Annotated,
    Any,
    Literal,
    NotRequired,
    Required,
    TypedDict,
    TypeVar,
    cast,
    get_args,
    get_type_hints,
)

from mnemo.core.api_types.records import Anchor
from mnemo.core.errors import InvalidInput

# Each closed set is declared once, as a type (the MCP tools' schemas, the type checker) and its values
# (`mnemo.core.models` re-exports them).
MemoryType = Literal["user", "feedback", "project", "reference"]
MEMORY_TYPES: tuple[str, ...] = get_args(MemoryType)
DEFAULT_KINDS = ("decision", "lesson", "pattern", "handoff", "fact")
SourceName = Literal["agent", "user", "import", "docs"]
SOURCES: tuple[str, ...] = get_args(SourceName)
StatusName = Literal["active", "pending", "rejected"]
STATUSES: tuple[str, ...] = get_args(StatusName)
CONFLICT_RESOLUTIONS = ("review", "supersede", "keep_both", "keep_existing")

SURFACES = ("cli", "mcp")  # the surfaces that build their parameters from a declaration (the LSP passes them on)


@dataclass(frozen=True)
class Param:
    """A field's default, its help text, the surfaces that offer it (every field reaches the service) and, when the
    type says too little, its allowed values (`choices`) and bounds (`ge`, `le`)."""

    default: Any
    help: str
    on: tuple[str, ...] = SURFACES
    choices: tuple[str, ...] | None = None
    ge: float | None = None
    le: float | None = None


class NoteFields(TypedDict, total=False):
    """What a note is, besides its text."""

    type: Annotated[str, Param("project", "project/reference: about the code (branch-scoped); user/feedback: "
                                          "about the person (hold on every branch)", choices=MEMORY_TYPES)]
    kind: Annotated[str, Param("fact", f"free-form; usually one of {', '.join(DEFAULT_KINDS)}")]
    scope: Annotated[str, Param("project", "always project; global and team are reached by promote", on=("cli",))]
    tags: Annotated[list[str] | None, Param(None, "a few topic words")]
    importance: Annotated[float, Param(0.5, "how much it matters, 0..1", ge=0.0, le=1.0)]
    anchors: Annotated[list[Anchor] | None, Param(None, "the places in the code it is about", on=())]
    provenance: Annotated[dict[str, Any] | None, Param(None, "where it comes from (an import's file and line)",
                                                       on=())]


class DraftOptions(NoteFields, total=False):
    """A note and how it is written: who writes it, whether it is trusted, and the status it lands with."""

    source: Annotated[str, Param("user", "who writes it", on=("cli",), choices=("user", "agent"))]
    trust: Annotated[str, Param("trusted", "trusted, or untrusted (an import's note until a person accepts it)",
                                on=())]
    status: Annotated[str | None, Param(None, "None: active, or pending when an agent writes under the `confirm` "
                                              "write policy", on=(), choices=STATUSES)]


class RememberOptions(DraftOptions, total=False):
    """The options of `remember`, after its text."""

    on_conflict: Annotated[str | None, Param(None, "what a contradiction does (None: the caller's "
                                                   "MNEMO_ON_CONFLICT, by default review)", on=(),
                                             choices=CONFLICT_RESOLUTIONS)]


class BatchNote(NoteFields, total=False):
    """One note of a `remember_batch` (the fields of one `remember`; `text` is required)."""

    text: Required[str]


# -- reading a declaration ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Field:
    name: str
    type: Any  # the annotation without its `Param`
    param: Param


@cache
def fields(decl: type) -> tuple[Field, ...]:
    """The fields of a declaration (a TypedDict of `Annotated[type, Param(...)]`), in declaration order (a base's
    first). A field without a `Param` has no default: it is not an option (`BatchNote.text`)."""
    out = []
    for name, hint in get_type_hints(decl, include_extras=True).items():
        args = get_args(hint)
        while args and getattr(hint, "__origin__", None) in (Required, NotRequired):  # Required[Annotated[...]]
            hint, args = args[0], get_args(args[0])
        params = [a for a in args[1:] if isinstance(a, Param)]
        if params:
            out.append(Field(name, args[0], params[0]))
    return tuple(out)


@cache
def defaults(decl: type) -> Mapping[str, Any]:
    return {f.name: f.param.default for f in fields(decl)}


@cache
def names(decl: type) -> tuple[str, ...]:
    return tuple(get_type_hints(decl))


def offered(decl: type, surface: str) -> tuple[Field, ...]:
    """The fields `surface` (cli | mcp) offers."""
    return tuple(f for f in fields(decl) if surface in f.param.on)


T = TypeVar("T")


def filled(decl: type[T], given: Mapping[str, Any], method: str = "remember") -> T:
    """`given` with the declared default of every field it leaves out; a name the declaration does not hold is an
    `InvalidInput` that names the accepted ones (refused, never ignored)."""
    declared = defaults(cast(type, decl))
    unknown = [k for k in given if k not in declared]
    if unknown:
        raise InvalidInput(f"{method} does not take {', '.join(f'`{k}`' for k in unknown[:5])}; nothing was done",
                           hint=f"{method} takes: {', '.join(declared)}")
    return cast(T, {**declared, **given})
