import { describe, test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";

import type { ConfigSource } from "../../common/settings";
import {
  DEFAULTS, RESTART_KEYS, SettingKeys, mcpEnvironment, needsRestart, readSettings, serverEnvironment,
} from "../../common/settings";
import { Commands, EXTENSION_HANDLED_SERVER_COMMANDS, ServerCommands } from "../../common/constants";

// Compiled to out/src/test/unit: the package root is four levels up.
const PACKAGE = JSON.parse(fs.readFileSync(path.resolve(__dirname, "..", "..", "..", "..", "package.json"), "utf8")) as {
  contributes: {
    configuration: { properties: Record<string, { default: unknown; type: string }> };
    commands: { command: string }[];
    menus: Record<string, { command: string }[]>;
  };
  capabilities: { untrustedWorkspaces: { supported: string; restrictedConfigurations: string[] } };
};
const PROPS = PACKAGE.contributes.configuration.properties;

function source(values: Record<string, unknown>): ConfigSource {
  return { get: <T>(key: string) => values[key] as T | undefined };
}

describe("readSettings", () => {
  test("defaults match package.json", () => {
    assert.equal(PROPS[`mnemo.${SettingKeys.pythonPath}`]?.default, DEFAULTS.pythonPath);
    assert.deepEqual(PROPS[`mnemo.${SettingKeys.extraArgs}`]?.default, [...DEFAULTS.extraArgs]);
    assert.equal(PROPS[`mnemo.${SettingKeys.home}`]?.default, DEFAULTS.home);
    assert.equal(PROPS[`mnemo.${SettingKeys.trace}`]?.default, DEFAULTS.trace);
  });

  test("every key the extension reads is declared in package.json", () => {
    for (const key of Object.values(SettingKeys)) {
      assert.ok(PROPS[`mnemo.${key}`], `mnemo.${key} missing from package.json`);
    }
  });

  test("an empty configuration gives the defaults and no problems", () => {
    const { settings, problems } = readSettings(source({}));
    assert.deepEqual(settings, DEFAULTS);
    assert.deepEqual(problems, []);
  });

  test("values are read and trimmed", () => {
    const { settings } = readSettings(source({
      "pythonPath": " /venv/bin/python ", "server.extraArgs": ["--log-file", "x"], home: "~/m",
      "trace.server": "verbose", writePolicy: "confirm",
    }));
    assert.deepEqual(settings, { pythonPath: "/venv/bin/python", extraArgs: ["--log-file", "x"], home: "~/m",
                                 trace: "verbose", writePolicy: "confirm" });
    assert.ok(Object.isFrozen(settings));
  });

  test("wrong types keep the default and are reported", () => {
    const { settings, problems } = readSettings(source({
      "pythonPath": 3, "server.extraArgs": "--x", "trace.server": "loud", writePolicy: "yolo",
    }));
    assert.deepEqual(settings, DEFAULTS);
    assert.equal(problems.length, 4);
    assert.match(problems.join("\n"), /mnemo\.writePolicy should be one of auto, confirm/);
    assert.match(problems.join("\n"), /mnemo\.pythonPath should be text/);
    assert.match(problems.join("\n"), /mnemo\.server\.extraArgs should be a list of strings/);
    assert.match(problems.join("\n"), /mnemo\.trace\.server should be one of off, messages, verbose/);
  });
});

describe("restart and environment", () => {
  test("only settings that pick the process restart it", () => {
    assert.ok(needsRestart((s) => s === "mnemo.pythonPath"));
    assert.ok(needsRestart((s) => s === "mnemo.home"));
    assert.ok(!needsRestart((s) => s === "mnemo.hover.maxMemories"));
    for (const key of RESTART_KEYS) {
      assert.ok(PROPS[key], `${key} missing from package.json`);
    }
  });

  test("restart keys are ignored in untrusted workspaces", () => {
    const restricted = PACKAGE.capabilities.untrustedWorkspaces.restrictedConfigurations;
    assert.equal(PACKAGE.capabilities.untrustedWorkspaces.supported, "limited");
    for (const key of RESTART_KEYS) {
      assert.ok(restricted.includes(key), `${key} should be a restricted configuration`);
    }
  });

  test("mnemo.home becomes MNEMO_HOME, expanded", () => {
    const env = serverEnvironment({ ...DEFAULTS, home: "~/store" }, { PATH: "/bin" }, (v) => v.replace("~", "/h"));
    assert.equal(env.MNEMO_HOME, "/h/store");
    assert.equal(env.PATH, "/bin");
    assert.equal(env.PYTHONUNBUFFERED, "1");
    assert.equal(serverEnvironment(DEFAULTS, { MNEMO_HOME: "/keep" }).MNEMO_HOME, "/keep");
  });

  test("the MCP server for chat agents gets the editor's write policy, the store and the workspace", () => {
    assert.deepEqual(mcpEnvironment({ ...DEFAULTS, writePolicy: "confirm" }, "/h/store", "/w/repo"),
                     { MNEMO_WRITE_POLICY: "confirm", MNEMO_HOME: "/h/store", MNEMO_PROJECT_ROOT: "/w/repo" });
    assert.deepEqual(mcpEnvironment(DEFAULTS, undefined, undefined), { MNEMO_WRITE_POLICY: "auto" });
    assert.equal(PROPS[`mnemo.${SettingKeys.writePolicy}`]?.default, DEFAULTS.writePolicy);
  });
});

describe("commands in package.json", () => {
  test("every command the extension registers is contributed, and vice versa", () => {
    const contributed = new Set(PACKAGE.contributes.commands.map((c) => c.command));
    assert.deepEqual([...contributed].sort(), Object.values(Commands).sort());
    for (const [menu, entries] of Object.entries(PACKAGE.contributes.menus)) {
      for (const entry of entries) {
        assert.ok(contributed.has(entry.command), `${menu} names unknown command ${entry.command}`);
      }
    }
  });

  test("server commands the extension handles itself share its ids", () => {
    assert.ok(EXTENSION_HANDLED_SERVER_COMMANDS.has(ServerCommands.rememberSelection));
    assert.ok(EXTENSION_HANDLED_SERVER_COMMANDS.has(ServerCommands.openMemory));
    assert.ok(!EXTENSION_HANDLED_SERVER_COMMANDS.has(ServerCommands.snapshotMerge));
  });
});
