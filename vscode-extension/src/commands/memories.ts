/** Promote, deprecate and forget a memory (a tree node, the server's `{id}`, or one picked from a list). */
import * as vscode from "vscode";

import { ServerCommands } from "../common/constants";
import type { WriteResult } from "../common/protocol";
import { firstLine } from "../views/model";
import type { CommandContext } from "./shared";
import { isNode, isObject, memoryArg } from "./shared";

export async function promote(ctx: CommandContext, arg?: unknown): Promise<unknown> {
  const id = await memoryArg(ctx, arg, "Mnemo: Promote a project memory to global", "project");
  if (!id) {
    return undefined;
  }
  const to = isObject(arg) && typeof arg.to === "string" ? arg.to : "global";
  const result = await ctx.server.command<WriteResult>(ServerCommands.promote, { id, to });
  await ctx.afterWrite("promote", [id, result.memory?.id ?? id]);
  if (result.memory) {
    await ctx.views.memories.reveal(result.memory.id);
  }
  void vscode.window.showInformationMessage(
    `Promoted to ${to}${result.memory ? `: “${firstLine(result.memory.text, 60)}”` : ""}`);
  return result;
}

export async function deprecate(ctx: CommandContext, arg?: unknown): Promise<unknown> {
  const id = await memoryArg(ctx, arg, "Mnemo: Deprecate a memory", "hybrid");
  if (!id) {
    return undefined;
  }
  let reason = isObject(arg) && typeof arg.reason === "string" ? arg.reason : undefined;
  if (reason === undefined) {
    reason = await vscode.window.showInputBox({
      title: "Mnemo: Deprecate", prompt: "Why is it no longer true? (optional; it leaves recall, stays in history)",
      ignoreFocusOut: true,
    });
    if (reason === undefined) {
      return undefined;
    }
  }
  const result = await ctx.server.command<WriteResult>(ServerCommands.deprecate,
                                                        reason ? { id, reason } : { id });
  await ctx.afterWrite("deprecate", [id]);
  void vscode.window.showInformationMessage("Deprecated: it no longer appears in recall.");
  return result;
}

export async function forget(ctx: CommandContext, arg?: unknown): Promise<unknown> {
  const id = await memoryArg(ctx, arg, "Mnemo: Forget a memory", "hybrid");
  if (!id) {
    return undefined;
  }
  const label = isNode(arg) && arg.type === "memory" ? `“${firstLine((arg).memory.text, 60)}”` : id;
  const confirm = await vscode.window.showWarningMessage(
    `Forget ${label}? It is removed for good; a tombstone keeps it from coming back through imports.`,
    { modal: true }, "Forget");
  if (confirm !== "Forget") {
    return undefined;
  }
  const result = await ctx.server.command(ServerCommands.forget, { id });
  await ctx.afterWrite("forget", [id]);
  return result;
}
