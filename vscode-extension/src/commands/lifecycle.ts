/** Lifecycle: run decay, compact; a progress notification, then the report's counts. */
import * as vscode from "vscode";

import { ServerCommands } from "../common/constants";
import { describeReport } from "../common/format";
import type { CommandContext } from "./shared";

export async function runDecay(ctx: CommandContext): Promise<unknown> {
  return lifecycle(ctx, "decay", "running decay", ServerCommands.runDecay, "Decay done");
}

export async function compact(ctx: CommandContext): Promise<unknown> {
  return lifecycle(ctx, "compact", "compacting memory", ServerCommands.compact, "Compaction done");
}

async function lifecycle(ctx: CommandContext, reason: string, doing: string, command: string,
                         done: string): Promise<unknown> {
  const result = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: `Mnemo: ${doing}…` },
    () => ctx.server.command<Record<string, unknown>>(command, {}));
  await ctx.afterWrite(reason, []);
  const counts = describeReport(result);
  void vscode.window.showInformationMessage(`${done}${counts ? `: ${counts}` : ""}.`);
  return result;
}
