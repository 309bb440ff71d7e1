/**
 * Which Python runs Mnemo's server, and whether Mnemo is installed there.
 *
 * Pure: the environment (settings, the Python extension, the file system, running a process) is injected, so the
 * lookup order and the messages are unit-tested with fakes. The VS Code glue lives in `server.ts`.
 */

/** Where an interpreter came from, shown in logs and error messages. */
export type InterpreterSource = "setting" | "python-extension" | "default";

export interface Interpreter {
  /** The command to run: the interpreter's path, one element (`mnemo.pythonPath` is a path, never split). */
  readonly command: readonly string[];
  readonly source: InterpreterSource;
}

export interface InterpreterEnvironment {
  /** `mnemo.pythonPath`, already read for the right scope ("" when unset). */
  readonly settingPath: string;
  /** The Python extension's active interpreter for the workspace, or undefined when it is absent or has none. */
  activeEnvironment(): Promise<string | undefined>;
  /** What `${workspaceFolder}` in the setting stands for (undefined: no folder is open). */
  readonly workspaceFolder: string | undefined;
  /** What `${userHome}` and a leading `~` in the setting stand for. */
  readonly userHome: string;
}

/** The setting that names the interpreter (package.json; mirrored in mnemo.editor_settings as `python_path`). */
export const PYTHON_PATH_SETTING = "mnemo.pythonPath";

/** The interpreter used when neither the setting nor the Python extension names one. */
export const DEFAULT_PYTHON = "python3";

/**
 * Resolves the interpreter in the documented order: the `mnemo.pythonPath` setting, then the Python extension's
 * active environment, then `python3` on PATH. Never throws: an unavailable Python extension is skipped.
 */
export async function resolveInterpreter(env: InterpreterEnvironment): Promise<Interpreter> {
  const configured = env.settingPath.trim();
  if (configured) {
    return { command: [expandPath(configured, env.workspaceFolder, env.userHome)], source: "setting" };
  }
  let active: string | undefined;
  try {
    active = await env.activeEnvironment();
  } catch {
    active = undefined;
  }
  if (active?.trim()) {
    return { command: [active.trim()], source: "python-extension" };
  }
  return { command: [DEFAULT_PYTHON], source: "default" };
}

/** Replaces `${workspaceFolder}`, `${userHome}` and a leading `~` the way VS Code users expect in path settings. */
export function expandPath(value: string, workspaceFolder: string | undefined, userHome: string): string {
  let out = value;
  if (out === "~" || out.startsWith("~/")) {
    out = userHome + out.slice(1);
  }
  out = out.split("${userHome}").join(userHome);
  if (workspaceFolder !== undefined) {
    out = out.split("${workspaceFolder}").join(workspaceFolder);
  }
  return out;
}

/** The probe run with the interpreter: prints Python's and Mnemo's versions as JSON, or fails on the import. */
export const PROBE_SCRIPT =
  "import json, sys\n" +
  "out = {'python': '%d.%d.%d' % sys.version_info[:3], 'executable': sys.executable}\n" +
  "try:\n" +
  "    import mnemo\n" +
  "    out['mnemo'] = getattr(mnemo, '__version__', 'unknown')\n" +
  "except Exception as exc:\n" +
  "    out['error'] = '%s: %s' % (type(exc).__name__, exc)\n" +
  "print(json.dumps(out))\n";

/** What running a process gave: exit code (null when it could not start), output, and a spawn error if any. */
export interface ProcessResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly spawnError?: string;
}

export type ProbeResult =
  | { readonly ok: true; readonly python: string; readonly mnemo: string; readonly executable: string }
  | { readonly ok: false; readonly problem: "python-missing" | "python-too-old" | "mnemo-missing" | "probe-failed";
      readonly message: string; readonly detail: string };

/** The oldest Python Mnemo supports. */
export const MIN_PYTHON: readonly [number, number] = [3, 11];

/**
 * Turns the probe's process result into a verdict with a message that says what happened and how to fix it.
 * `interpreter` is only used for the wording.
 */
export function interpretProbe(interpreter: Interpreter, result: ProcessResult): ProbeResult {
  const shown = interpreter.command.join(" ");
  const where = describeSource(interpreter.source);
  if (result.spawnError !== undefined || result.code === null) {
    return {
      ok: false,
      problem: "python-missing",
      message:
        `Mnemo could not start Python: "${shown}" (${where}) was not found or could not run. ` +
        `Set \`${PYTHON_PATH_SETTING}\` to a Python 3.11+ interpreter that has Mnemo installed, ` +
        "or select one with the Python extension.",
      detail: result.spawnError ?? result.stderr,
    };
  }
  let parsed: { python?: string; mnemo?: string; executable?: string; error?: string } | undefined;
  try {
    const last = result.stdout.trim().split("\n").pop() ?? "";
    parsed = JSON.parse(last) as typeof parsed;
  } catch {
    parsed = undefined;
  }
  if (!parsed || typeof parsed.python !== "string") {
    return {
      ok: false,
      problem: "probe-failed",
      message: `Mnemo could not check the Python at "${shown}" (${where}): it exited with code ${result.code}.`,
      detail: (result.stderr || result.stdout).trim(),
    };
  }
  const [major, minor] = parsed.python.split(".").map((part) => Number.parseInt(part, 10));
  if (major === undefined || minor === undefined || major < MIN_PYTHON[0] ||
      (major === MIN_PYTHON[0] && minor < MIN_PYTHON[1])) {
    return {
      ok: false,
      problem: "python-too-old",
      message:
        `Mnemo needs Python ${MIN_PYTHON.join(".")} or newer; "${shown}" (${where}) is Python ${parsed.python}. ` +
        `Point \`${PYTHON_PATH_SETTING}\` at a newer interpreter.`,
      detail: parsed.executable ?? "",
    };
  }
  if (parsed.mnemo === undefined) {
    return {
      ok: false,
      problem: "mnemo-missing",
      message:
        `Mnemo is not installed in the Python at "${shown}" (${where}). ` +
        `Install it with: ${installCommand(parsed.executable ?? shown)} ` +
        `— or set \`${PYTHON_PATH_SETTING}\` to an interpreter that has it.`,
      detail: parsed.error ?? "",
    };
  }
  return { ok: true, python: parsed.python, mnemo: parsed.mnemo, executable: parsed.executable ?? shown };
}

/** The exact command that installs Mnemo into the given interpreter. */
export function installCommand(executable: string): string {
  const quoted = /[\s"']/.test(executable) ? `"${executable}"` : executable;
  return `${quoted} -m pip install mnemo`;
}

export function describeSource(source: InterpreterSource): string {
  switch (source) {
    case "setting":
      return `from the ${PYTHON_PATH_SETTING} setting`;
    case "python-extension":
      return "the Python extension's active environment";
    case "default":
      return "the default, found on PATH";
  }
}

/** The language server's command line for an interpreter. */
export function serverCommand(interpreter: Interpreter, subcommand: "lsp" | "mcp"): { command: string; args: string[] } {
  const [command, ...fixed] = interpreter.command;
  return { command: command ?? DEFAULT_PYTHON, args: [...fixed, "-m", "mnemo", subcommand] };
}
