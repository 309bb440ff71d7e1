/** Edit, promote, deprecate and forget a memory (a tree node, the server's `{id}`, or one picked from a list). */
import * as vscode from "vscode";

import { Requests, ServerCommands } from "../common/constants";
import { parseTags } from "../common/format";
import type { ForgetResult, GetMemoryResult, Memory, UpdateResult, WriteResult } from "../common/protocol";
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
    `Forget ${label}? It leaves recall and the views; Undo (or \`mnemo restore ${id}\`) brings it back until ` +
    "the forget retention passes.", { modal: true }, "Forget");
  if (confirm !== "Forget") {
    return undefined;
  }
  const result = await ctx.server.command<ForgetResult>(ServerCommands.forget, { id });
  await ctx.afterWrite("forget", [id]);
  if (result.restorable !== false) {
    void offerUndo(ctx, id, label);  // the notification stays while the user reads on: not awaited
  }
  return result;
}

/** "Forgotten … [Undo]": Undo restores the memory from its tombstone. */
async function offerUndo(ctx: CommandContext, id: string, label: string): Promise<void> {
  const choice = await vscode.window.showInformationMessage(`Forgotten: ${label}`, "Undo");
  if (choice !== "Undo") {
    return;
  }
  try {
    const restored = await ctx.server.command<WriteResult>(ServerCommands.restore, { id });
    await ctx.afterWrite("restore", [id]);
    await ctx.views.memories.reveal(id);
    void vscode.window.showInformationMessage(
      `Restored${restored.memory ? `: “${firstLine(restored.memory.text, 60)}”` : ""}`);
  } catch (err) {
    void vscode.window.showErrorMessage(`Mnemo: could not restore ${id}: ${String(err)}`);
  }
}

/** The memory a command was invoked on: the tree node's, else asked from the server. */
async function memoryFor(ctx: CommandContext, arg: unknown, id: string): Promise<Memory | undefined> {
  if (isNode(arg) && arg.type === "memory") {
    return arg.memory;
  }
  const got = await ctx.server.request<GetMemoryResult>(Requests.getMemory, { id });
  return got.memory;
}

/**
 * Edit a memory: asks for the new text (the current one filled in) and its tags, then the server's `update`
 * re-checks it like a new memory and keeps the previous version (`mnemo history ID`).
 */
export async function editMemory(ctx: CommandContext, arg?: unknown): Promise<unknown> {
  const id = await memoryArg(ctx, arg, "Mnemo: Edit a memory", "hybrid");
  if (!id) {
    return undefined;
  }
  const current = await memoryFor(ctx, arg, id);
  const text = await vscode.window.showInputBox({
    title: "Mnemo: Edit memory", value: current?.text ?? "", ignoreFocusOut: true,
    prompt: "The new text (checked like a new memory; the previous version is kept in its history)",
    validateInput: (v) => (v.trim() ? undefined : "The text cannot be empty"),
  });
  if (text === undefined) {
    return undefined;
  }
  const tagsText = await vscode.window.showInputBox({
    title: "Mnemo: Edit memory (tags)", value: (current?.tags ?? []).join(", "), ignoreFocusOut: true,
    prompt: "Tags, comma-separated (Enter keeps them)",
  });
  if (tagsText === undefined) {
    return undefined;
  }
  const result = await ctx.server.command<UpdateResult>(ServerCommands.editMemory,
                                                         { id, text, tags: parseTags(tagsText) });
  await ctx.afterWrite("update", [id]);
  await ctx.views.memories.reveal(id);
  const say = result.status === "updated" || result.status === "unchanged"
    ? vscode.window.showInformationMessage : vscode.window.showWarningMessage;
  void say(`Mnemo: ${result.message ?? result.status ?? "edited"}`);
  return result;
}
