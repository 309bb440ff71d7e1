/**
 * The settings the extension itself reads (which Python, which store, tracing), parsed once into a frozen object.
 *
 * package.json `contributes.configuration` is the one source of every `mnemo.*` setting; `mnemo.editor_settings` in
 * Python mirrors it (tests/unit/test_settings_sync.py) and the language server reads the rest itself through
 * `workspace/configuration`. Pure: the configuration is injected (a `vscode.WorkspaceConfiguration` fits).
 */

/** The part of `vscode.WorkspaceConfiguration` this module needs. */
export interface ConfigSource {
  get<T>(section: string): T | undefined;
}

export type TraceLevel = "off" | "messages" | "verbose";
export type WritePolicy = "auto" | "confirm";

export interface ExtensionSettings {
  /** `mnemo.pythonPath`: "" means "ask the Python extension, then python3". */
  readonly pythonPath: string;
  /** `mnemo.server.extraArgs`: appended to `python -m mnemo lsp`. */
  readonly extraArgs: readonly string[];
  /** `mnemo.home`: the store folder, passed to the server as MNEMO_HOME ("" keeps the environment's). */
  readonly home: string;
  /** `mnemo.trace.server`. */
  readonly trace: TraceLevel;
  /** `mnemo.writePolicy`: sent to the MCP server the extension registers (MNEMO_WRITE_POLICY); the language
   * server reads it itself and sends it with each request. */
  readonly writePolicy: WritePolicy;
}

/** Keys below `mnemo.` the extension reads; a change to any of them restarts the server. */
export const SettingKeys = {
  pythonPath: "pythonPath",
  extraArgs: "server.extraArgs",
  home: "home",
  trace: "trace.server",
  writePolicy: "writePolicy",
} as const;

export const DEFAULTS: ExtensionSettings = Object.freeze({
  pythonPath: "",
  extraArgs: Object.freeze([]),
  home: "",
  trace: "off",
  writePolicy: "auto",
});

/** Settings whose change needs a new server process (the rest are pulled by the running server). */
export const RESTART_KEYS: readonly string[] = [SettingKeys.pythonPath, SettingKeys.extraArgs, SettingKeys.home]
  .map((key) => `mnemo.${key}`);

const TRACE_LEVELS: readonly TraceLevel[] = ["off", "messages", "verbose"];
const WRITE_POLICIES: readonly WritePolicy[] = ["auto", "confirm"];

/**
 * Reads the extension's settings. A value of the wrong type keeps its default and is reported in `problems`
 * (the user sees one message; nothing fails).
 */
export function readSettings(config: ConfigSource): { settings: ExtensionSettings; problems: string[] } {
  const problems: string[] = [];
  const str = (key: string, fallback: string): string => {
    const value = config.get<unknown>(key);
    if (value === undefined || value === null) {
      return fallback;
    }
    if (typeof value !== "string") {
      problems.push(`mnemo.${key} should be text; using "${fallback}"`);
      return fallback;
    }
    return value;
  };
  const rawArgs = config.get<unknown>(SettingKeys.extraArgs);
  let extraArgs: readonly string[] = DEFAULTS.extraArgs;
  if (Array.isArray(rawArgs) && rawArgs.every((arg) => typeof arg === "string")) {
    extraArgs = Object.freeze([...(rawArgs)]);
  } else if (rawArgs !== undefined && rawArgs !== null) {
    problems.push(`mnemo.${SettingKeys.extraArgs} should be a list of strings; ignoring it`);
  }
  const traceValue = str(SettingKeys.trace, DEFAULTS.trace);
  let trace: TraceLevel = DEFAULTS.trace;
  if ((TRACE_LEVELS as readonly string[]).includes(traceValue)) {
    trace = traceValue as TraceLevel;
  } else {
    problems.push(`mnemo.${SettingKeys.trace} should be one of ${TRACE_LEVELS.join(", ")}; using "off"`);
  }
  const policyValue = str(SettingKeys.writePolicy, DEFAULTS.writePolicy);
  let writePolicy: WritePolicy = DEFAULTS.writePolicy;
  if ((WRITE_POLICIES as readonly string[]).includes(policyValue)) {
    writePolicy = policyValue as WritePolicy;
  } else {
    problems.push(`mnemo.${SettingKeys.writePolicy} should be one of ${WRITE_POLICIES.join(", ")}; using "auto"`);
  }
  const settings: ExtensionSettings = Object.freeze({
    pythonPath: str(SettingKeys.pythonPath, DEFAULTS.pythonPath).trim(),
    extraArgs,
    home: str(SettingKeys.home, DEFAULTS.home).trim(),
    trace,
    writePolicy,
  });
  return { settings, problems };
}

/** True when a configuration change touches a setting that needs a new server process. */
export function needsRestart(affects: (section: string) => boolean): boolean {
  return RESTART_KEYS.some((key) => affects(key));
}

/** The environment of the server process: the extension host's, plus MNEMO_HOME when `mnemo.home` is set. */
export function serverEnvironment(settings: ExtensionSettings, base: NodeJS.ProcessEnv,
                                  expand: (value: string) => string = (v) => v): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...base };
  if (settings.home) {
    env.MNEMO_HOME = expand(settings.home);
  }
  // The server speaks LSP on stdout: keep Python from buffering it and from writing .pyc files into the repo.
  env.PYTHONUNBUFFERED = "1";
  env.PYTHONDONTWRITEBYTECODE = "1";
  return env;
}

/**
 * The environment VS Code starts Mnemo's MCP server with (for chat agents): the store, the workspace (the project
 * is never an agent's argument) and the editor's request-shaped settings. `mnemo.writePolicy` becomes
 * MNEMO_WRITE_POLICY, which the MCP server sends with every write: an agent's note waits in Review under `confirm`
 * whichever process started the owner.
 */
export function mcpEnvironment(settings: ExtensionSettings, home: string | undefined,
                               folder: string | undefined): Record<string, string> {
  const env: Record<string, string> = { MNEMO_WRITE_POLICY: settings.writePolicy };
  if (home) {
    env.MNEMO_HOME = home;
  }
  if (folder) {
    env.MNEMO_PROJECT_ROOT = folder;
  }
  return env;
}
