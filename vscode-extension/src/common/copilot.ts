/**
 * Mnemo in Copilot's agent mode, without the user typing anything:
 * - an instructions file (package.json `contributes.chatInstructions`, `applyTo: "**"`, so VS Code adds it to chat
 *   requests by itself) that this module rewrites with the skills and memories for the file open in the editor;
 * - two language model tools (`contributes.languageModelTools`, `vscode.lm.registerTool`): `mnemo_context` (the
 *   block for any file and request; read-only) and `mnemo_remember` (writes, after the user confirms).
 * Both run `python -m mnemo context|remember` with the server's interpreter and store, so the block is the one
 * Claude Code's hooks and `mnemo context` get (built once, in Python). Feature-detected: an editor without the
 * tools API gets the instructions file only. In an untrusted workspace nothing runs.
 */
import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import * as vscode from "vscode";

import { CONFIG_SECTION, Commands } from "./constants";
import {
  CONTEXT_TOOL, INSTRUCTIONS_FILE, REMEMBER_TOOL, contextArgs, describeRemember, instructionsText,
  readCopilotSettings, rememberArgs, rememberConfirmation,
} from "./copilotText";
import type { ContextInput, RememberInput } from "./copilotText";
import { logger } from "./logger";
import type { MnemoServer } from "./server";
import { SettingKeys, readSettings } from "./settings";

const REFRESH_MS = 800;
const RUN_TIMEOUT_MS = 20_000;

interface ContextResult {
  markdown?: string;
  tokens?: number;
}

/** The part of `vscode.lm` used here; absent on editors without language model tools. */
interface ToolsApi {
  registerTool?: <T>(name: string, tool: vscode.LanguageModelTool<T>) => vscode.Disposable;
}

function folderFor(file: string | undefined): string | undefined {
  const uri = file ? vscode.Uri.file(file) : vscode.window.activeTextEditor?.document.uri;
  const folder = (uri && vscode.workspace.getWorkspaceFolder(uri)) ?? vscode.workspace.workspaceFolders?.[0];
  return folder?.uri.fsPath;
}

function activeFile(): string | undefined {
  const doc = vscode.window.activeTextEditor?.document;
  return doc && doc.uri.scheme === "file" ? doc.uri.fsPath : undefined;
}

/** Runs `python -m mnemo ...` with the language server's interpreter and store; resolves its stdout. */
function runMnemo(server: MnemoServer, args: string[], cwd: string | undefined,
                  token?: vscode.CancellationToken): Promise<string> {
  const interpreter = server.interpreter;
  if (!vscode.workspace.isTrusted) {
    return Promise.reject(new Error("Mnemo is off in an untrusted workspace."));
  }
  if (!interpreter) {
    return Promise.reject(new Error("Mnemo's Python is not set up yet (see Output > Mnemo)."));
  }
  const [command, ...fixed] = interpreter.command;
  const { settings } = readSettings(vscode.workspace.getConfiguration(CONFIG_SECTION));
  const env = { ...server.environment(), MNEMO_WRITE_POLICY: settings.writePolicy, MNEMO_LEARN_CORRECTIONS: "off" };
  return new Promise((resolve, reject) => {
    const child = execFile(command ?? "python3", [...fixed, ...args], { cwd, env, timeout: RUN_TIMEOUT_MS,
                                                                         maxBuffer: 8 * 1024 * 1024 },
                           (err, stdout, stderr) => {
                             if (err) {
                               reject(new Error((stderr || err.message).trim().split("\n").slice(-3).join(" ")));
                             } else {
                               resolve(stdout);
                             }
                           });
    token?.onCancellationRequested(() => child.kill());
  });
}

async function contextBlock(server: MnemoServer, input: ContextInput, budget: number,
                            token?: vscode.CancellationToken): Promise<ContextResult> {
  const file = typeof input.file === "string" && input.file ? input.file : activeFile();
  const out = await runMnemo(server, contextArgs(input, activeFile(), budget), folderFor(file), token);
  return JSON.parse(out) as ContextResult;
}

function text(value: string): vscode.LanguageModelToolResult {
  return new vscode.LanguageModelToolResult([new vscode.LanguageModelTextPart(value)]);
}

function registerTools(server: MnemoServer): vscode.Disposable[] {
  const lm = (vscode as unknown as { lm?: ToolsApi }).lm;
  if (typeof lm?.registerTool !== "function") {
    logger.info("This editor has no language model tools API; Mnemo's Copilot tools are not registered.");
    return [];
  }
  const budget = (): number => readCopilotSettings(vscode.workspace.getConfiguration(CONFIG_SECTION)).settings
    .tokenBudget;
  const contextTool: vscode.LanguageModelTool<ContextInput> = {
    prepareInvocation: () => ({ invocationMessage: "Reading Mnemo's skills and memories" }),
    async invoke(options, token) {
      try {
        const res = await contextBlock(server, options.input ?? {}, budget(), token);
        return text(res.markdown?.trim() ? res.markdown : "Nothing in Mnemo's memory or skills applies here.");
      } catch (err) {
        return text(`Mnemo could not answer: ${(err as Error).message}`);
      }
    },
  };
  const rememberTool: vscode.LanguageModelTool<RememberInput> = {
    prepareInvocation(options) {
      const { title, message } = rememberConfirmation(options.input ?? {});
      return { invocationMessage: "Remembering in Mnemo",
               confirmationMessages: { title, message: new vscode.MarkdownString(message) } };
    },
    async invoke(options, token) {
      const { args, error } = rememberArgs(options.input ?? {});
      if (!args) {
        return text(`Nothing was remembered: ${error ?? "bad input"}`);
      }
      try {
        const out = await runMnemo(server, args, folderFor(undefined), token);
        return text(describeRemember(JSON.parse(out) as Parameters<typeof describeRemember>[0]));
      } catch (err) {
        return text(`Nothing was remembered: ${(err as Error).message}`);
      }
    },
  };
  const disposables = [lm.registerTool(CONTEXT_TOOL, contextTool), lm.registerTool(REMEMBER_TOOL, rememberTool)];
  logger.info(`Registered Mnemo's language model tools (${CONTEXT_TOOL}, ${REMEMBER_TOOL}).`);
  return disposables;
}

/** Keeps the contributed instructions file in step with the open file. */
class InstructionsFile implements vscode.Disposable {
  private timer: NodeJS.Timeout | undefined;
  private lastKey = "";
  private lastFile: string | undefined;
  private warned = false;
  private running = 0;

  constructor(private readonly server: MnemoServer, private readonly file: string) {}

  schedule(): void {
    if (this.timer) {
      clearTimeout(this.timer);
    }
    this.timer = setTimeout(() => void this.refresh(), REFRESH_MS);
  }

  private write(content: string): void {
    try {
      const current = fs.existsSync(this.file) ? fs.readFileSync(this.file, "utf8") : "";
      if (current !== content) {
        fs.mkdirSync(path.dirname(this.file), { recursive: true });
        fs.writeFileSync(this.file, content, "utf8");
      }
    } catch (err) {
      if (!this.warned) {
        this.warned = true;
        logger.warn(`Cannot update Copilot's Mnemo instructions (${this.file}): ${(err as Error).message}`);
      }
    }
  }

  async refresh(): Promise<void> {
    const { settings } = readCopilotSettings(vscode.workspace.getConfiguration(CONFIG_SECTION));
    // a panel, a memory view or an untitled document with the focus keeps the last file's context
    const file = activeFile() ?? this.lastFile;
    if (!settings.instructions || !vscode.workspace.isTrusted) {
      this.write(instructionsText(undefined, undefined, settings.instructions ? "Mnemo is off in this untrusted " +
        "workspace." : "Turned off (mnemo.copilot.instructions)."));
      this.lastKey = "";
      return;
    }
    const key = `${file ?? ""}|${this.server.serverState?.branch ?? ""}|${settings.tokenBudget}`;
    if (key === this.lastKey || !this.server.interpreter) {
      return;
    }
    const ticket = ++this.running;
    try {
      const res = await contextBlock(this.server, { file }, settings.tokenBudget);
      if (ticket !== this.running) {
        return;   // a newer refresh is under way
      }
      const shown = file ? vscode.workspace.asRelativePath(file) : undefined;
      this.write(instructionsText(res.markdown, shown));
      this.lastKey = key;
      this.lastFile = file;
      logger.info(`Copilot instructions updated for ${shown ?? "no file"} (~${res.tokens ?? 0} tokens).`);
    } catch (err) {
      logger.warn(`Copilot instructions not updated: ${(err as Error).message}`);
    }
  }

  invalidate(): void {
    this.lastKey = "";
    this.schedule();
  }

  dispose(): void {
    if (this.timer) {
      clearTimeout(this.timer);
    }
  }
}

/** Shows what Copilot gets for the open file, through the registered tool (the path Copilot uses). */
async function showCopilotContext(server: MnemoServer): Promise<void> {
  let body: string;
  const lm = vscode.lm as Partial<typeof vscode.lm> | undefined;
  if (typeof lm?.invokeTool === "function" && lm.tools?.some((t) => t.name === CONTEXT_TOOL)) {
    const res = await lm.invokeTool(CONTEXT_TOOL, { input: { file: activeFile() }, toolInvocationToken: undefined });
    body = res.content.map((p) => (p instanceof vscode.LanguageModelTextPart ? p.value : "")).join("");
  } else {
    const { settings } = readCopilotSettings(vscode.workspace.getConfiguration(CONFIG_SECTION));
    body = (await contextBlock(server, {}, settings.tokenBudget)).markdown ?? "";
  }
  const doc = await vscode.workspace.openTextDocument({ language: "markdown", content: body || "_Nothing applies._" });
  await vscode.window.showTextDocument(doc, { preview: true });
}

export function registerCopilot(server: MnemoServer, context: vscode.ExtensionContext): vscode.Disposable {
  const instructions = new InstructionsFile(server, context.asAbsolutePath(INSTRUCTIONS_FILE));
  const memoriesChanged = (): void => instructions.invalidate();
  return vscode.Disposable.from(
    instructions,
    ...registerTools(server),
    vscode.commands.registerCommand(Commands.showCopilotContext, () => showCopilotContext(server)),
    vscode.window.onDidChangeActiveTextEditor(() => instructions.schedule()),
    server.onDidChangeServerState(() => instructions.schedule()),
    server.onDidChangeInterpreter(() => instructions.invalidate()),
    server.onDidChangeMemories(memoriesChanged),
    vscode.workspace.onDidGrantWorkspaceTrust(() => instructions.invalidate()),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration(`${CONFIG_SECTION}.copilot`) ||
          e.affectsConfiguration(`${CONFIG_SECTION}.${SettingKeys.home}`)) {
        instructions.invalidate();
      }
    }),
  );
}
