/**
 * The language server's life: find Python, check Mnemo is there, start `python -m mnemo lsp` with
 * vscode-languageclient, restart on settings or interpreter changes, and fan the server's notifications out to
 * the views. Nothing starts in an untrusted workspace.
 */
import * as os from "node:os";
import { execFile } from "node:child_process";
import * as vscode from "vscode";
import type { ExecuteCommandRegistrationOptions, RegistrationData } from "vscode-languageclient/node";
import {
  ExecuteCommandRequest, LanguageClient, ResponseError, RevealOutputChannelOn, State,
} from "vscode-languageclient/node";
import type { ClientCapabilities, LanguageClientOptions, ServerOptions, StaticFeature } from "vscode-languageclient/node";

import {
  CONFIG_SECTION, ContextKeys, EXTENSION_HANDLED_SERVER_COMMANDS, HOVER_COMMAND_LINKS, Notifications, SERVER_ID,
  SERVER_NAME,
} from "./constants";
import { createLogger, logger } from "./logger";
import type { ErrorData, MemoriesChanged, StateChanged } from "./protocol";
import type { Interpreter, ProbeResult, ProcessResult } from "./python";
import {
  PROBE_SCRIPT, PYTHON_PATH_SETTING, expandPath, interpretProbe, resolveInterpreter, serverCommand,
} from "./python";
import type { ExtensionSettings } from "./settings";
import { needsRestart, readSettings, serverEnvironment } from "./settings";

/** The extension's view of the server process. */
export type ClientState = "stopped" | "restricted" | "starting" | "running" | "failed";

/** A failed request, with the server's `data` (docs/protocol.md "Errors") when it sent one. */
export class MnemoRequestError extends Error {
  constructor(message: string, readonly data: ErrorData | undefined, readonly rpcCode: number | undefined) {
    super(message);
  }
  get code(): string | undefined {
    return this.data?.code;
  }
}

/** The Python extension's API, as far as Mnemo uses it (declared here to avoid a dependency). */
interface PythonExtensionApi {
  environments?: {
    getActiveEnvironmentPath(resource?: vscode.Uri): { path: string } | undefined;
    resolveEnvironment(env: string | { path: string }): Promise<{ executable?: { uri?: vscode.Uri } } | undefined>;
    onDidChangeActiveEnvironmentPath?: vscode.Event<unknown>;
  };
}

const PYTHON_EXTENSION_ID = "ms-python.python";
const PROBE_TIMEOUT_MS = 30_000;
const RESTART_DELAY_MS = 1_000;

function runProcess(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<ProcessResult> {
  return new Promise((resolve) => {
    execFile(command, args, { env, timeout: PROBE_TIMEOUT_MS, maxBuffer: 1 << 20, windowsHide: true },
      (error, stdout, stderr) => {
        const spawnError = error && "code" in error && typeof error.code === "string" ? error.message : undefined;
        const code = error ? (typeof error.code === "number" ? error.code : spawnError ? null : 1) : 0;
        resolve(spawnError !== undefined ? { code, stdout, stderr, spawnError } : { code, stdout, stderr });
      });
  });
}

export class MnemoServer implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private clientState: ClientState = "stopped";
  private interpreterValue: Interpreter | undefined;
  private settingsValue: ExtensionSettings = readSettings(vscode.workspace.getConfiguration(CONFIG_SECTION)).settings;
  private lastState: StateChanged | undefined;
  private lastProblem: string | undefined;
  private restartTimer: NodeJS.Timeout | undefined;
  private starting: Promise<void> | undefined;
  private readonly disposables: vscode.Disposable[] = [];
  private readonly clientDisposables: vscode.Disposable[] = [];

  private readonly stateEmitter = new vscode.EventEmitter<ClientState>();
  private readonly serverStateEmitter = new vscode.EventEmitter<StateChanged>();
  private readonly memoriesEmitter = new vscode.EventEmitter<MemoriesChanged>();
  private readonly interpreterEmitter = new vscode.EventEmitter<void>();

  /** The client-side state changed (stopped, starting, running, ...). */
  readonly onDidChangeClientState = this.stateEmitter.event;
  /** `mnemo/stateChanged` arrived (branch, active skills, owner connection). */
  readonly onDidChangeServerState = this.serverStateEmitter.event;
  /** `mnemo/memoriesChanged` arrived, or the extension wrote something. */
  readonly onDidChangeMemories = this.memoriesEmitter.event;
  /** The interpreter or the settings the MCP server definition depends on changed. */
  readonly onDidChangeInterpreter = this.interpreterEmitter.event;

  constructor(private readonly context: vscode.ExtensionContext) {
    this.disposables.push(
      this.stateEmitter, this.serverStateEmitter, this.memoriesEmitter, this.interpreterEmitter,
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (needsRestart((section) => e.affectsConfiguration(section))) {
          logger.info("Settings that choose the server process changed; restarting.");
          this.scheduleRestart();
        }
      }),
      vscode.workspace.onDidGrantWorkspaceTrust(() => {
        logger.info("Workspace trusted; starting Mnemo.");
        void this.restart();
      }),
      vscode.workspace.onDidChangeWorkspaceFolders(() => this.scheduleRestart()),
      vscode.window.onDidChangeActiveTextEditor((editor) => this.sendActiveEditor(editor)),
    );
    void this.watchPythonExtension();
  }

  get state(): ClientState {
    return this.clientState;
  }

  get serverState(): StateChanged | undefined {
    return this.lastState;
  }

  get interpreter(): Interpreter | undefined {
    return this.interpreterValue;
  }

  get settings(): ExtensionSettings {
    return this.settingsValue;
  }

  /** Why the server is not running, for the status item and view messages. */
  get problem(): string | undefined {
    return this.lastProblem;
  }

  /** The environment the server (and the MCP server) runs with. */
  environment(): NodeJS.ProcessEnv {
    return serverEnvironment(this.settingsValue, process.env, (v) => this.expand(v));
  }

  private setState(state: ClientState): void {
    this.clientState = state;
    void vscode.commands.executeCommand("setContext", ContextKeys.serverState, state);
    this.stateEmitter.fire(state);
  }

  private workspaceFolder(): string | undefined {
    return vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  }

  private expand(value: string): string {
    return expandPath(value, this.workspaceFolder(), os.homedir());
  }

  private scheduleRestart(): void {
    if (this.restartTimer) {
      clearTimeout(this.restartTimer);
    }
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      void this.restart();
    }, RESTART_DELAY_MS);
  }

  private async pythonExtensionApi(): Promise<PythonExtensionApi | undefined> {
    const extension = vscode.extensions.getExtension<PythonExtensionApi>(PYTHON_EXTENSION_ID);
    if (!extension) {
      return undefined;
    }
    try {
      return extension.isActive ? extension.exports : await extension.activate();
    } catch (error) {
      logger.warn("The Python extension did not activate:", error);
      return undefined;
    }
  }

  private async watchPythonExtension(): Promise<void> {
    const api = await this.pythonExtensionApi();
    const event = api?.environments?.onDidChangeActiveEnvironmentPath;
    if (event) {
      this.disposables.push(event(() => {
        if (!this.settingsValue.pythonPath) {
          logger.info("The Python extension's interpreter changed; restarting.");
          this.scheduleRestart();
        }
      }));
    }
  }

  private async activePythonEnvironment(): Promise<string | undefined> {
    const api = await this.pythonExtensionApi();
    const environments = api?.environments;
    if (!environments) {
      return undefined;
    }
    const resource = vscode.workspace.workspaceFolders?.[0]?.uri;
    const active = environments.getActiveEnvironmentPath(resource);
    if (!active?.path) {
      return undefined;
    }
    const resolved = await environments.resolveEnvironment(active);
    return resolved?.executable?.uri?.fsPath ?? active.path;
  }

  /** Starts the server unless it is running; resolves when it answered `initialize` (or failed). */
  async start(): Promise<void> {
    if (this.client || this.starting) {
      return this.starting;
    }
    this.starting = this.doStart().finally(() => {
      this.starting = undefined;
    });
    return this.starting;
  }

  private async doStart(): Promise<void> {
    if (!vscode.workspace.isTrusted) {
      this.lastProblem = "This workspace is not trusted: Mnemo reads and executes nothing from it.";
      logger.info(this.lastProblem);
      this.setState("restricted");
      return;
    }
    this.setState("starting");
    const { settings, problems } = readSettings(vscode.workspace.getConfiguration(CONFIG_SECTION));
    this.settingsValue = settings;
    for (const problem of problems) {
      logger.warn(`Settings: ${problem}`);
    }
    const interpreter = await resolveInterpreter({
      settingPath: settings.pythonPath,
      activeEnvironment: () => this.activePythonEnvironment(),
      workspaceFolder: this.workspaceFolder(),
      userHome: os.homedir(),
    });
    this.interpreterValue = interpreter;
    this.interpreterEmitter.fire();
    const env = this.environment();
    logger.info(`Python: ${interpreter.command.join(" ")} (${interpreter.source})`);
    const [probeCommand, ...probeArgs] = interpreter.command;
    const probe: ProbeResult = interpretProbe(
      interpreter, await runProcess(probeCommand ?? "python3", [...probeArgs, "-c", PROBE_SCRIPT], env));
    if (!probe.ok) {
      this.fail(probe.message, probe.detail, probe.problem === "mnemo-missing" ? probe.message : undefined);
      return;
    }
    logger.info(`Mnemo ${probe.mnemo} on Python ${probe.python} (${probe.executable})`);

    const { command, args } = serverCommand(interpreter, "lsp");
    const serverOptions: ServerOptions = {
      command,
      args: [...args, ...settings.extraArgs],
      options: { env, ...(this.workspaceFolder() ? { cwd: this.workspaceFolder() } : {}) },
    };
    const channel = createLogger();
    const clientOptions: LanguageClientOptions = {
      documentSelector: [{ scheme: "file" }],
      outputChannel: channel,
      traceOutputChannel: channel,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      synchronize: { configurationSection: CONFIG_SECTION },
      // The server reads its settings from initializationOptions (nested `mnemo.*` values), then pulls
      // `workspace/configuration` on every didChangeConfiguration.
      initializationOptions: JSON.parse(JSON.stringify(vscode.workspace.getConfiguration(CONFIG_SECTION))) as object,
      // a hover's Edit link runs `mnemo.editMemory`; no other command link in hover Markdown is trusted
      markdown: { isTrusted: { enabledCommands: HOVER_COMMAND_LINKS }, supportHtml: false },
    };
    const client = new LanguageClient(SERVER_ID, SERVER_NAME, serverOptions, clientOptions);
    this.keepServerCommandsForTheExtension(client);
    client.registerFeature(commandLinksFeature);
    this.clientDisposables.push(
      client.onNotification(Notifications.stateChanged, (params: StateChanged) => {
        this.lastState = params;
        this.serverStateEmitter.fire(params);
      }),
      client.onNotification(Notifications.memoriesChanged, (params: MemoriesChanged) => {
        this.memoriesEmitter.fire(params);
      }),
      client.onDidChangeState((e) => {
        if (e.newState === State.Stopped && this.client === client) {
          this.lastProblem = "Mnemo's language server stopped.";
          this.setState("failed");
        } else if (e.newState === State.Running && this.client === client) {
          this.lastProblem = undefined;
          this.setState("running");
        }
      }),
    );
    this.client = client;
    try {
      await client.start();
    } catch (error) {
      this.client = undefined;
      this.fail("Mnemo's language server did not start.", error instanceof Error ? error.message : String(error));
      return;
    }
    this.lastProblem = undefined;
    this.setState("running");
    this.sendActiveEditor(vscode.window.activeTextEditor);
  }

  /**
   * The extension registers the server's user-facing commands itself (same ids: they prompt for what is missing
   * and show results), so the language client must not register them a second time.
   */
  private keepServerCommandsForTheExtension(client: LanguageClient): void {
    const feature = client.getFeature(ExecuteCommandRequest.method);
    const register = feature.register.bind(feature);
    feature.register = (data: RegistrationData<ExecuteCommandRegistrationOptions>): void => {
      const commands = (data.registerOptions.commands ?? []).filter(
        (id) => !EXTENSION_HANDLED_SERVER_COMMANDS.has(id));
      register({ ...data, registerOptions: { ...data.registerOptions, commands } });
    };
  }

  private fail(message: string, detail: string, installHint?: string): void {
    this.lastProblem = message;
    logger.error(message);
    if (detail) {
      logger.error(detail);
    }
    this.setState("failed");
    const actions = installHint ? ["Copy Install Command", "Open Settings", "Show Logs"] : ["Open Settings", "Show Logs"];
    void vscode.window.showErrorMessage(message, ...actions).then(async (choice) => {
      if (choice === "Show Logs") {
        logger.show();
      } else if (choice === "Open Settings") {
        await vscode.commands.executeCommand("workbench.action.openSettings", PYTHON_PATH_SETTING);
      } else if (choice === "Copy Install Command" && installHint) {
        const match = /Install it with: (.+?) —/.exec(installHint);
        await vscode.env.clipboard.writeText(match?.[1] ?? installHint);
      }
    });
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    for (const d of this.clientDisposables.splice(0)) {
      d.dispose();
    }
    if (client) {
      try {
        await client.stop(5000);
      } catch (error) {
        logger.warn("Stopping the language server:", error);
      }
      await client.dispose().catch(() => undefined);
    }
    this.lastState = undefined;
    this.setState("stopped");
  }

  async restart(): Promise<void> {
    if (this.starting) {
      await this.starting;
    }
    await this.stop();
    await this.start();
  }

  private sendActiveEditor(editor: vscode.TextEditor | undefined): void {
    if (!this.client || this.clientState !== "running") {
      return;
    }
    const uri = editor?.document.uri.scheme === "file" ? editor.document.uri.toString() : null;
    void this.client.sendNotification(Notifications.didChangeActiveEditor, { uri }).catch(
      (error: unknown) => logger.debug("didChangeActiveEditor:", error));
  }

  private requireClient(): LanguageClient {
    if (!this.client || this.clientState !== "running") {
      throw new MnemoRequestError(this.lastProblem ?? "Mnemo's language server is not running.", undefined, undefined);
    }
    return this.client;
  }

  /** A custom request (`mnemo/...`); failures become `MnemoRequestError` with the server's error data. */
  async request<T>(method: string, params: object = {}): Promise<T> {
    const client = this.requireClient();
    try {
      return await client.sendRequest<T>(method, params);
    } catch (error) {
      throw toRequestError(error);
    }
  }

  /** A server command (`workspace/executeCommand` with `arguments: [params]`). */
  async command<T>(command: string, params: object = {}): Promise<T> {
    const client = this.requireClient();
    try {
      return (await client.sendRequest(ExecuteCommandRequest.type, { command, arguments: [params] })) as T;
    } catch (error) {
      throw toRequestError(error);
    }
  }

  /** Lets the views refresh after a write the server may not announce. */
  notifyMemoriesChanged(reason: string, ids: string[] = []): void {
    this.memoriesEmitter.fire({ reason, ids });
  }

  dispose(): void {
    if (this.restartTimer) {
      clearTimeout(this.restartTimer);
    }
    void this.stop();
    for (const d of this.disposables) {
      d.dispose();
    }
  }

  /** The extension context, for features that store state. */
  get extensionContext(): vscode.ExtensionContext {
    return this.context;
  }
}

export function toRequestError(error: unknown): MnemoRequestError {
  if (error instanceof MnemoRequestError) {
    return error;
  }
  if (error instanceof ResponseError) {
    const data = (error.data ?? undefined) as ErrorData | undefined;
    return new MnemoRequestError(error.message, data, error.code);
  }
  return new MnemoRequestError(error instanceof Error ? error.message : String(error), undefined, undefined);
}

/**
 * Tells the server which command links this client runs in a hover (`capabilities.experimental.mnemoCommandLinks`):
 * it adds an Edit link to each memory only for such a client.
 */
const commandLinksFeature: StaticFeature = {
  fillClientCapabilities(capabilities: ClientCapabilities): void {
    const experimental = (capabilities.experimental ?? {}) as Record<string, unknown>;
    capabilities.experimental = { ...experimental, mnemoCommandLinks: [...HOVER_COMMAND_LINKS] };
  },
  initialize(): void {
    // nothing to set up: the capability is all
  },
  getState: () => ({ kind: "static" }),
  clear(): void {
    // nothing to clear
  },
};
