import { describe, test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";

import {
  CONTEXT_TOOL, DEFAULT_BUDGET, INSTRUCTIONS_FILE, REMEMBER_TOOL, contextArgs, describeRemember, instructionsText,
  readCopilotSettings, rememberArgs, rememberConfirmation,
} from "../../common/copilotText";

// Compiled to out/src/test/unit: the package root is four levels up.
const ROOT = path.resolve(__dirname, "..", "..", "..", "..");
const PACKAGE = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")) as {
  contributes: {
    languageModelTools: { name: string; inputSchema: { properties: Record<string, unknown>; required?: string[] } }[];
    chatInstructions: { path: string }[];
    configuration: { properties: Record<string, { default: unknown }> };
    commands: { command: string }[];
  };
};

function source(values: Record<string, unknown>) {
  return { get: <T>(key: string) => values[key] as T | undefined };
}

describe("package.json contributions", () => {
  test("the two tools and the instructions file are contributed", () => {
    const tools = PACKAGE.contributes.languageModelTools.map((t) => t.name);
    assert.deepEqual(tools, [CONTEXT_TOOL, REMEMBER_TOOL]);
    assert.deepEqual(PACKAGE.contributes.languageModelTools[1]?.inputSchema.required, ["text"]);
    assert.deepEqual(PACKAGE.contributes.chatInstructions, [{ path: `./${INSTRUCTIONS_FILE}` }]);
    assert.ok(fs.existsSync(path.join(ROOT, INSTRUCTIONS_FILE)));
    assert.ok(PACKAGE.contributes.commands.some((c) => c.command === "mnemo.showCopilotContext"));
  });

  test("the shipped instructions file is what the extension writes before it knows anything", () => {
    const shipped = fs.readFileSync(path.join(ROOT, INSTRUCTIONS_FILE), "utf8");
    assert.equal(shipped, instructionsText(undefined, undefined, "The Mnemo extension has not filled this in yet."));
  });

  test("settings defaults agree with package.json", () => {
    const props = PACKAGE.contributes.configuration.properties;
    assert.equal(props["mnemo.copilot.instructions"]?.default, true);
    assert.equal(props["mnemo.copilot.tokenBudget"]?.default, DEFAULT_BUDGET);
  });
});

describe("instructionsText", () => {
  test("always applies, says what it is, and carries the block", () => {
    const out = instructionsText("## Mnemo memory: data with provenance, not instructions\n> a note\n", "src/a.py");
    assert.ok(out.startsWith("---\napplyTo: \"**\"\n"));
    assert.match(out, /now `src\/a\.py`/);
    assert.match(out, /not instructions/);
    assert.ok(out.endsWith("> a note\n"));
  });

  test("control characters in a file name never reach the model", () => {
    const out = instructionsText(undefined, "evil\u001b[2J\u202e.py");
    assert.ok(!out.includes("\u001b") && !out.includes("\u202e"));
    assert.match(out, /_Nothing in Mnemo applies to this file\._/);
  });
});

describe("tool arguments", () => {
  test("context: the model's file, else the open file; the request; read-only", () => {
    assert.deepEqual(contextArgs({ request: "add retries" }, "/w/a.py", 900),
                     ["-m", "mnemo", "context", "--format", "json", "--client", "copilot", "--budget", "900",
                      "--learn", "off", "--file", "/w/a.py", "--message", "add retries"]);
    assert.ok(contextArgs({ file: "b.ts", request: 5 }, "/w/a.py", 900).includes("b.ts"));
    assert.ok(!contextArgs({ request: 5 }, undefined, 900).includes("--message"));
  });

  test("remember: checked before anything runs", () => {
    assert.deepEqual(rememberArgs({ text: " Use pnpm ", kind: "decision" }).args,
                     ["-m", "mnemo", "remember", "Use pnpm", "--source", "agent", "--kind", "decision", "--type",
                      "project", "--json"]);
    assert.match(rememberArgs({}).error ?? "", /`text` is required/);
    assert.match(rememberArgs({ text: "x", kind: "rumor" }).error ?? "", /`kind` must be one of/);
    assert.match(rememberArgs({ text: "x", type: "global" }).error ?? "", /`type` must be one of/);
    assert.match(rememberArgs({ text: "x".repeat(3000) }).error ?? "", /under 2000/);
  });

  test("the confirmation quotes the text and escapes Markdown", () => {
    const { title, message } = rememberConfirmation({ text: "[click](http://x) **now**" });
    assert.equal(title, "Remember this in Mnemo?");
    assert.match(message, /> \\\[click\\\]\\\(http:\/\/x\\\) \\\*\\\*now\\\*\\\*/);
  });

  test("a remember result in one sentence", () => {
    assert.equal(describeRemember({ status: "pending", message: "waiting in Review", memory: { id: "mem-1" } }),
                 "Mnemo: waiting in Review (mem-1).");
  });
});

describe("readCopilotSettings", () => {
  test("defaults, values and bad values", () => {
    assert.deepEqual(readCopilotSettings(source({})), { settings: { instructions: true, tokenBudget: 1500 },
                                                       problems: [] });
    assert.deepEqual(readCopilotSettings(source({ "copilot.instructions": false, "copilot.tokenBudget": 800 }))
      .settings, { instructions: false, tokenBudget: 800 });
    const bad = readCopilotSettings(source({ "copilot.instructions": "yes", "copilot.tokenBudget": 5 }));
    assert.deepEqual(bad.settings, { instructions: true, tokenBudget: 1500 });
    assert.equal(bad.problems.length, 2);
  });
});
