"""What reaches the agent, by relevance across the block (issue 20, third pass; core/agent/context_block.py): a
rule far less about the request than a note the block already holds goes in by reference (the real MiniLM
model scores the rule's sections and the note), and a Mnemo starter skill chosen after one of the project's own
rules is named, not inlined (the override order: specific before generic)."""

from __future__ import annotations

from mnemo.core.agent.context_block import Request, _memory_item, _skill_item, fit_budget
from mnemo.core.skills.result import Activation

REQUEST = "why is the monthly orders report query timing out"
NOTE = ("The monthly orders report query times out because the orders table has no index on created_at; "
        "it scans the whole table every month-end")
SQL_RULE = """# SQL at Acme

## Slow queries
- Look at the query plan first (EXPLAIN ANALYZE); a sequential scan of a big table means a missing index.
- Index the columns a report filters and sorts on, such as created_at.

## Naming
- Tables are plural, columns snake_case.
"""
AZURE_RULE = """# Azure Durable Functions in C#

## Orchestrator functions
- Orchestrator code must be deterministic: no DateTime.Now, no random numbers, no direct I/O.
- Call activities with CallActivityAsync and await them.

## Entity functions
- Durable entities hold small pieces of state; signal them instead of calling when no answer is needed.

## Fan-out and fan-in
- Start the activity tasks first, then await Task.WhenAll on them.
"""


def act(name, body, scope="project", score=0.9, path=None):
    return Activation(skill_id=f"id-{name}", name=name, description="", source_path=path or f"/r/.cursor/rules/{name}.mdc",
                      source_format="cursor", scope=scope, score=score, activated_by=["semantic"],
                      signals={"probability": score}, matched={}, token_cost=len(body) // 4, always=False,
                      reason=f"probability {score:.2f}", body=body)


class Scorer:
    """The skill engine's vectors (real MiniLM), as `build_context` hands them to the block."""

    def __init__(self, engine, ctx):
        self.sk = engine.skill_engine(ctx)

    def message_vector(self, text):
        return self.sk.message_vector(text)

    def text_vectors(self, texts, wait=True):
        return self.sk.text_vectors(texts, wait)

    def conversation_score(self, message, wait=True):
        return self.sk.conversation_score(message, wait)


def note_item():
    return _memory_item({"id": "mem-orders", "type": "project", "kind": "lesson", "text": NOTE}, "### Memories",
                        NOTE, 0.8)


def test_a_rule_far_less_about_the_request_than_a_note_in_the_block_is_named_not_inlined(real_engine, ctx):
    req = Request.checked(event="context", message=REQUEST)
    azure = _skill_item(act("azure-durable-functions", AZURE_RULE, score=0.4), None)
    sql = _skill_item(act("sql", SQL_RULE, score=0.4), None)
    inlined, refs, dropped = fit_budget([note_item(), azure, sql], ctx, req, [], Scorer(real_engine, ctx))
    assert [i.id for i in inlined] == ["mem-orders", "id-sql"]           # the rule about slow queries stays in
    assert [r.id for r in refs] == ["id-azure-durable-functions"]        # the unrelated one is one line
    assert azure.extra["left_out"].startswith("a note in the block is far more about the request")
    assert azure.extra["relevance"] < 0.3 and not dropped
    # without the note, nothing outranks the rule: it goes in as before
    inlined, refs, _ = fit_budget([_skill_item(act("azure-durable-functions", AZURE_RULE, score=0.4), None)], ctx,
                                  req, [], Scorer(real_engine, ctx))
    assert [i.id for i in inlined] == ["id-azure-durable-functions"] and not refs


def test_a_starter_skill_after_the_projects_own_rule_is_named_not_inlined(engine, ctx):
    req = Request.checked(event="context", message="add security headers to our reverse proxy config")
    nginx = _skill_item(act("nginx", "# nginx\n\n## Headers\n- add_header Strict-Transport-Security on every "
                            "server block.\n", score=1.0), None)
    starter = _skill_item(act("security-review", "# Security review\n\n## Checklist\n- Validate every input.\n",
                              scope="builtin", score=0.72, path="/mnemo/skills/builtin/security-review.md"), None)
    inlined, refs, _ = fit_budget([nginx, starter], ctx, req, [])
    assert [i.id for i in inlined] == ["id-nginx"] and [r.id for r in refs] == ["id-security-review"]
    assert starter.extra["left_out"] == "a starter skill after the project's own rule: named, not inlined"
    # a starter the request chose first (no rule of the project's own before it) is inlined as before
    first = _skill_item(act("security-review", "# Security review\n\n## Checklist\n- Validate every input.\n",
                            scope="builtin", score=0.72, path="/mnemo/skills/builtin/security-review.md"), None)
    inlined, refs, _ = fit_budget([first], ctx, req, [])
    assert [i.id for i in inlined] == ["id-security-review"] and not refs


VERIFY_RULE = """# Verify changes before committing

After you think you're done with a change, verify it with the `check` command: it reports bugs in the code.
Investigate the bug report, decide whether each reported bug is real, and fix it when it is.

## Do
1. Run `check` when you make large changes.
2. Run `check` when you think you're done with a change.

## Don't
1. Don't run `check` more than once per change.
"""


def test_a_request_that_reads_as_conversation_leaves_out_a_rule_chosen_weakly_by_meaning_alone(real_engine, ctx):
    """Issue 20, fourth pass (`needs_no_rule`): "fix the bug" is about as close to the turns of a conversation
    ("try again") as to a rule about verifying changes that the model chose for it weakly (0.39, by meaning
    alone): the rule is left out, with why. A request about what the rule says keeps it, and so does a rule the
    file's globs or the request's words also chose."""
    from mnemo.core.agent import context_block as cx

    vague = Request.checked(event="context", message="fix the bug")
    rule = _skill_item(act("verify-changes", VERIFY_RULE, score=0.39), None)
    inlined, refs, dropped = fit_budget([rule], ctx, vague, [], Scorer(real_engine, ctx))
    assert not inlined and not refs and [d.id for d in dropped] == ["id-verify-changes"]
    assert rule.extra["left_out"].startswith("the request reads as conversation or everyday chat")
    assert rule.extra["relevance"] - rule.extra["chat"] < cx.CHAT_MARGIN
    asked = Request.checked(event="context", message="run the bug checker on my changes before I commit them")
    inlined, _, _ = fit_budget([_skill_item(act("verify-changes", VERIFY_RULE, score=0.39), None)], ctx, asked, [],
                               Scorer(real_engine, ctx))
    assert [i.id for i in inlined] == ["id-verify-changes"]
    by_glob = _skill_item(act("verify-changes", VERIFY_RULE, score=0.39), None)
    by_glob.skill.act.activated_by = ["glob", "semantic"]
    inlined, _, _ = fit_budget([by_glob], ctx, vague, [], Scorer(real_engine, ctx))
    assert [i.id for i in inlined] == ["id-verify-changes"]


LONG_SECTION = "\n".join(f"- Point {n}: keep the Terraform state in a remote backend with locking, one state per "
                         f"environment, and never commit a .tfstate file; step {n} of the state checklist."
                         for n in range(40))


def test_a_rule_after_the_most_probable_one_gets_at_most_its_share_in_part(real_engine, ctx):
    """Issue 20, fourth pass: a rule after the most probable one goes in by its best section cut to
    ``SECONDARY_PART_MAX`` tokens (no further sections, no preamble past it), with one line naming the rest;
    the most probable rule still gets its whole best sections."""
    from mnemo.core.agent import context_block as cx
    from mnemo.core.text import estimate_tokens

    req = Request.checked(event="context", message="keep the terraform state in a remote backend with locking")
    first = _skill_item(act("terraform-iac", "# Terraform at Acme\n\n## State\n- Remote state in S3 with a "
                            "DynamoDB lock table.\n", score=1.0), None)
    body = f"# Terraform on Azure\n\nHow we write Terraform for Azure.\n\n## State management\n{LONG_SECTION}\n\n" \
           f"## Naming\n- Resource names carry the environment.\n"
    second = _skill_item(act("terraform-azure", body, score=0.99), None)
    inlined, _, _ = fit_budget([first, second], ctx, req, [], Scorer(real_engine, ctx))
    assert [i.id for i in inlined] == ["id-terraform-iac", "id-terraform-azure"]
    part = second.skill
    assert part.include is not None and part.cut is not None
    assert estimate_tokens(part.cut[1]) <= cx.SECONDARY_PART_MAX
    assert "Not included here (read" in second.text and "Naming" in second.text


JAVADOC_RULE = """# Javadoc and headers

## License header
- Every Java file starts with the Apache 2.0 license header, the year of its creation first.

## Javadoc
- Every public class and method has a Javadoc comment whose first sentence says what it does.
- Document every parameter with @param and every checked exception with @throws.
""" + "\n".join(f"- Javadoc rule {n}: link related types with {{@link}} and keep the summary to one line."
                for n in range(30))


def test_a_rule_only_the_files_globs_chose_is_named_unless_a_section_is_about_the_request(real_engine, ctx):
    """Issue 20, fourth pass: the request chose the Spring rule; the Javadoc rule came by the file's globs alone
    (no word or meaning of the request chose it) and none of its sections is about constructor injection, so it
    is named (one line, with why), not inlined. A request about Javadoc keeps it in."""
    req = Request.checked(event="context", file="src/main/java/acme/OrderService.java",
                          message="use constructor injection instead of autowired fields")
    spring = _skill_item(act("spring", "# Spring at Acme\n\n## Dependency injection\n- Use constructor injection; "
                             "never @Autowired on fields.\n", score=1.0), None)
    javadoc = _skill_item(act("javadoc", JAVADOC_RULE, score=0.9), None)
    javadoc.skill.act.activated_by = ["glob"]
    inlined, refs, _ = fit_budget([spring, javadoc], ctx, req, [], Scorer(real_engine, ctx))
    assert [i.id for i in inlined] == ["id-spring"] and [r.id for r in refs] == ["id-javadoc"]
    assert javadoc.extra["left_out"].startswith("only the file's globs chose it")
    assert javadoc.extra["relevance"] < 0.35
    about = Request.checked(event="context", file="src/main/java/acme/OrderService.java",
                            message="write the Javadoc for every public method and its parameters")
    again = _skill_item(act("javadoc", JAVADOC_RULE, score=0.9), None)
    again.skill.act.activated_by = ["glob"]
    inlined, _, _ = fit_budget([again], ctx, about, [], Scorer(real_engine, ctx))
    assert [i.id for i in inlined] == ["id-javadoc"]
