import { describe, test } from "node:test";
import * as assert from "node:assert/strict";

import type { InterpreterEnvironment } from "../../common/python";
import {
  expandPath, installCommand, interpretProbe, resolveInterpreter, serverCommand,
} from "../../common/python";

function env(over: Partial<InterpreterEnvironment> & { active?: string | Error } = {}): InterpreterEnvironment {
  const { active, ...rest } = over;
  return {
    settingPath: "",
    workspaceFolder: "/ws",
    userHome: "/home/u",
    activeEnvironment: () => (active instanceof Error ? Promise.reject(active) : Promise.resolve(active)),
    ...rest,
  };
}

describe("resolveInterpreter", () => {
  test("the setting wins over the Python extension", async () => {
    const got = await resolveInterpreter(env({ settingPath: "/opt/py/bin/python", active: "/venv/bin/python" }));
    assert.deepEqual(got, { command: ["/opt/py/bin/python"], source: "setting" });
  });

  test("the setting expands ${workspaceFolder} and ~", async () => {
    assert.deepEqual((await resolveInterpreter(env({ settingPath: "${workspaceFolder}/.venv/bin/python" }))).command,
                     ["/ws/.venv/bin/python"]);
    assert.deepEqual((await resolveInterpreter(env({ settingPath: "~/py/bin/python" }))).command,
                     ["/home/u/py/bin/python"]);
  });

  test("a blank setting falls through to the Python extension", async () => {
    const got = await resolveInterpreter(env({ settingPath: "   ", active: "/venv/bin/python" }));
    assert.deepEqual(got, { command: ["/venv/bin/python"], source: "python-extension" });
  });

  test("no setting and no Python extension: python3", async () => {
    assert.deepEqual(await resolveInterpreter(env()), { command: ["python3"], source: "default" });
  });

  test("a failing Python extension is skipped, not fatal", async () => {
    const got = await resolveInterpreter(env({ active: new Error("extension crashed") }));
    assert.equal(got.source, "default");
  });
});

describe("expandPath", () => {
  test("leaves plain paths alone and expands ${userHome}", () => {
    assert.equal(expandPath("/usr/bin/python3", "/ws", "/h"), "/usr/bin/python3");
    assert.equal(expandPath("${userHome}/x", undefined, "/h"), "/h/x");
    assert.equal(expandPath("${workspaceFolder}/x", undefined, "/h"), "${workspaceFolder}/x");
  });
});

describe("interpretProbe", () => {
  const interpreter = { command: ["/venv/bin/python"], source: "setting" as const };

  test("Mnemo present", () => {
    const got = interpretProbe(interpreter, {
      code: 0, stderr: "",
      stdout: JSON.stringify({ python: "3.11.7", executable: "/venv/bin/python", mnemo: "0.1.0" }),
    });
    assert.deepEqual(got, { ok: true, python: "3.11.7", mnemo: "0.1.0", executable: "/venv/bin/python" });
  });

  test("Python missing says which interpreter and how to fix it", () => {
    const got = interpretProbe(interpreter, { code: null, stdout: "", stderr: "", spawnError: "spawn ENOENT" });
    assert.equal(got.ok, false);
    assert.ok(!got.ok && got.problem === "python-missing");
    assert.match(!got.ok ? got.message : "", /could not start Python: "\/venv\/bin\/python"/);
    assert.match(!got.ok ? got.message : "", /mnemo\.pythonPath/);
  });

  test("Mnemo missing gives the exact install command for that interpreter", () => {
    const got = interpretProbe({ command: ["python3"], source: "default" }, {
      code: 0, stderr: "",
      stdout: JSON.stringify({ python: "3.12.1", executable: "/usr/bin/python3",
                               error: "ModuleNotFoundError: No module named 'mnemo'" }),
    });
    assert.ok(!got.ok);
    assert.equal(got.problem, "mnemo-missing");
    assert.match(got.message, /Install it with: \/usr\/bin\/python3 -m pip install mnemo/);
    assert.match(got.message, /found on PATH/);
    assert.match(got.detail, /No module named 'mnemo'/);
  });

  test("an old Python is refused with its version", () => {
    const got = interpretProbe(interpreter, {
      code: 0, stderr: "", stdout: JSON.stringify({ python: "3.8.10", executable: "/venv/bin/python", mnemo: "0.1" }),
    });
    assert.ok(!got.ok);
    assert.equal(got.problem, "python-too-old");
    assert.match(got.message, /Python 3\.11 or newer.*Python 3\.8\.10/);
  });

  test("garbage output is a probe failure with the output as detail", () => {
    const got = interpretProbe(interpreter, { code: 1, stdout: "", stderr: "Traceback: boom" });
    assert.ok(!got.ok);
    assert.equal(got.problem, "probe-failed");
    assert.equal(got.detail, "Traceback: boom");
  });
});

describe("commands", () => {
  test("installCommand quotes paths with spaces", () => {
    assert.equal(installCommand("/a b/python"), '"/a b/python" -m pip install mnemo');
  });

  test("serverCommand keeps fixed interpreter arguments first", () => {
    assert.deepEqual(serverCommand({ command: ["py", "-3"], source: "setting" }, "lsp"),
                     { command: "py", args: ["-3", "-m", "mnemo", "lsp"] });
    assert.deepEqual(serverCommand({ command: ["/p"], source: "default" }, "mcp"),
                     { command: "/p", args: ["-m", "mnemo", "mcp"] });
  });
});
