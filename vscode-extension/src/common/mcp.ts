/**
 * Offers Mnemo's MCP server (`python -m mnemo mcp`, stdio) to chat agents in VS Code, when the running VS Code has
 * the MCP API (1.101+). Feature-detected: on an editor without it, this does nothing. In an untrusted workspace no
 * definition is offered (it would run the workspace's interpreter).
 */
import * as vscode from "vscode";

import { CONFIG_SECTION, MCP_PROVIDER_ID } from "./constants";
import { logger } from "./logger";
import { serverCommand } from "./python";
import type { MnemoServer } from "./server";
import { SettingKeys, mcpEnvironment, readSettings } from "./settings";

/** The part of the `vscode.lm` namespace used here; absent or partial on older editors. */
interface McpApi {
  registerMcpServerDefinitionProvider?: (id: string, provider: vscode.McpServerDefinitionProvider) =>
    vscode.Disposable;
}

type StdioDefinitionConstructor = new (label: string, command: string, args?: string[],
                                       env?: Record<string, string | number | null>, version?: string) =>
  vscode.McpStdioServerDefinition;

export function registerMcpServer(server: MnemoServer, version: string): vscode.Disposable {
  const lm = (vscode as unknown as { lm?: McpApi }).lm;
  const Definition = (vscode as unknown as { McpStdioServerDefinition?: StdioDefinitionConstructor })
    .McpStdioServerDefinition;
  if (typeof lm?.registerMcpServerDefinitionProvider !== "function" || typeof Definition !== "function") {
    logger.info("This editor has no MCP server API; Mnemo's MCP server is not registered.");
    return new vscode.Disposable(() => undefined);
  }
  const changed = new vscode.EventEmitter<void>();
  const provider: vscode.McpServerDefinitionProvider = {
    onDidChangeMcpServerDefinitions: changed.event,
    provideMcpServerDefinitions: () => {
      const interpreter = server.interpreter;
      if (!vscode.workspace.isTrusted || !interpreter) {
        return [];
      }
      const { command, args } = serverCommand(interpreter, "mcp");
      const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
      // The store, the workspace, and the editor's write policy (read fresh: a change re-offers the definition).
      const { settings } = readSettings(vscode.workspace.getConfiguration(CONFIG_SECTION));
      const env = mcpEnvironment(settings, server.environment().MNEMO_HOME, folder?.fsPath);
      const definition = new Definition("Mnemo", command, args, env, version);
      if (folder) {
        definition.cwd = folder;
      }
      return [definition];
    },
  };
  const registration = lm.registerMcpServerDefinitionProvider(MCP_PROVIDER_ID, provider);
  logger.info("Registered Mnemo's MCP server with VS Code.");
  return vscode.Disposable.from(
    registration,
    changed,
    server.onDidChangeInterpreter(() => changed.fire()),
    vscode.workspace.onDidGrantWorkspaceTrust(() => changed.fire()),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration(`${CONFIG_SECTION}.${SettingKeys.writePolicy}`)) {
        changed.fire();
      }
    }),
  );
}
