/**
 * Mnemo's VS Code extension: wiring only. Each concern lives in `common/` (server, settings, the command table,
 * status, MCP), `commands/` (one module per command group) or `views/` (memories, skills, review).
 */
import * as vscode from "vscode";

import { CommandHandlers } from "./common/commands";
import { Views } from "./common/constants";
import { registerCopilot } from "./common/copilot";
import { MnemoDocuments } from "./common/documents";
import { createLogger, logger } from "./common/logger";
import { registerMcpServer } from "./common/mcp";
import { MnemoServer } from "./common/server";
import { createStatusItem } from "./common/status";
import { MemoriesProvider } from "./views/memories";
import type { TreeNode } from "./views/model";
import { ReviewProvider } from "./views/review";
import { SkillsProvider } from "./views/skills";
import type { NodeTreeProvider } from "./views/tree";

let server: MnemoServer | undefined;

function createView(id: string, provider: NodeTreeProvider): vscode.TreeView<TreeNode> {
  const view = vscode.window.createTreeView(id, { treeDataProvider: provider, showCollapseAll: true });
  provider.view = view;
  return view;
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  context.subscriptions.push(createLogger());
  const version = (context.extension.packageJSON as { version?: string }).version ?? "0.0.0";
  logger.info(`Mnemo extension ${version}; VS Code ${vscode.version}; trusted: ${vscode.workspace.isTrusted}`);

  server = new MnemoServer(context);
  const memories = new MemoriesProvider(server);
  const skills = new SkillsProvider(server);
  const review = new ReviewProvider(server);
  const docs = new MnemoDocuments();
  const commands = new CommandHandlers(server, { memories, skills, review }, docs);

  let lastMemoriesKey = "";
  let skillsTimer: NodeJS.Timeout | undefined;
  const refreshSkillsSoon = (): void => {
    if (skillsTimer) {
      clearTimeout(skillsTimer);
    }
    skillsTimer = setTimeout(() => void skills.refresh(), 250);
  };

  context.subscriptions.push(
    server, memories, skills, review, docs,
    createView(Views.memories, memories),
    createView(Views.skills, skills),
    createView(Views.review, review),
    ...commands.register(),
    createStatusItem(server),
    registerMcpServer(server, version),
    registerCopilot(server, context),
    server.onDidChangeClientState(() => void commands.refreshAll()),
    server.onDidChangeMemories(() => {
      void memories.refresh();
      void review.refresh();
    }),
    server.onDidChangeServerState((state) => {
      // The memories a window sees depend on the branch, the project and the store's availability only.
      const key = `${state.state}|${state.project?.id ?? ""}|${state.branch ?? ""}`;
      if (key !== lastMemoriesKey) {
        lastMemoriesKey = key;
        void memories.refresh();
        void review.refresh();
      }
      refreshSkillsSoon();
    }),
    vscode.window.onDidChangeActiveTextEditor(refreshSkillsSoon),
    new vscode.Disposable(() => skillsTimer && clearTimeout(skillsTimer)),
  );
  await vscode.commands.executeCommand("setContext", "mnemo.serverState", "stopped");
  // Do not hold up activation on Python: the views show "starting" meanwhile.
  void server.start();
}

export async function deactivate(): Promise<void> {
  await server?.stop();
  server = undefined;
}
