/**
 * The language status item: branch, active skills and server state, next to the language indicator.
 */
import * as vscode from "vscode";

import { Commands } from "./constants";
import { describeStatus } from "./format";
import type { MnemoServer } from "./server";

export function createStatusItem(server: MnemoServer): vscode.Disposable {
  const item = vscode.languages.createLanguageStatusItem("mnemo.status", [{ scheme: "file" }, { scheme: "untitled" }]);
  item.name = "Mnemo";
  const update = (): void => {
    const view = describeStatus(server.state, server.serverState, server.problem);
    item.text = view.text;
    item.detail = view.detail;
    item.busy = view.busy;
    item.severity = view.severity === "error" ? vscode.LanguageStatusSeverity.Error
      : view.severity === "warning" ? vscode.LanguageStatusSeverity.Warning : vscode.LanguageStatusSeverity.Information;
    item.command = server.state === "running"
      ? { title: "Show Logs", command: Commands.showLogs }
      : { title: "Restart", command: Commands.restart };
    item.accessibilityInformation = { label: `Mnemo: ${view.text.replace(/\$\([^)]*\)\s*/g, "")}` };
  };
  update();
  return vscode.Disposable.from(
    item,
    server.onDidChangeClientState(update),
    server.onDidChangeServerState(update),
  );
}
