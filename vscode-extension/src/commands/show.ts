/** Show: open memories (the server's Markdown of their cards), copy one, what would be injected, a skill file. */
import * as path from "node:path";
import * as vscode from "vscode";

import { Requests, ServerCommands } from "../common/constants";
import type { InjectionPreview, Memory } from "../common/protocol";
import type { CommandContext } from "./shared";
import { isNode, isObject, memoryArg } from "./shared";

export async function openMemory(ctx: CommandContext, arg?: unknown): Promise<unknown> {
  let params: Record<string, unknown>;
  if (isObject(arg) && !isNode(arg) && (Array.isArray(arg.ids) || typeof arg.id === "string")) {
    params = arg;
  } else {
    const id = await memoryArg(ctx, arg, "Mnemo: Open a memory", "hybrid");
    if (!id) {
      return undefined;
    }
    params = { id };
  }
  const result = await ctx.server.command<{ memories?: Memory[]; markdown?: string }>(
    ServerCommands.openMemory, params);
  const first = result.memories?.[0];
  const name = first ? `memory/${first.id}.md` : "memory/memories.md";
  await ctx.docs.showMarkdown(name, result.markdown ?? (result.memories ?? []).map((m) => m.text).join("\n\n"));
  return result;
}

export async function copyMemory(arg?: unknown): Promise<void> {
  if (isNode(arg) && arg.type === "memory") {
    await vscode.env.clipboard.writeText((arg).memory.text);
    vscode.window.setStatusBarMessage("Mnemo: memory copied", 2000);
  }
}

export async function showInjection(ctx: CommandContext, arg?: unknown): Promise<InjectionPreview | undefined> {
  const uri = isObject(arg) && typeof arg.uri === "string" ? arg.uri
    : vscode.window.activeTextEditor?.document.uri.scheme === "file"
      ? vscode.window.activeTextEditor.document.uri.toString() : undefined;
  const message = isObject(arg) && typeof arg.message === "string" ? arg.message : undefined;
  const editor = vscode.window.activeTextEditor;
  const position = isObject(arg) && isObject(arg.position) ? arg.position
    : editor && editor.document.uri.toString() === uri
      ? { line: editor.selection.active.line, character: editor.selection.active.character } : undefined;
  const result = await ctx.server.request<InjectionPreview>(Requests.injectionPreview, {
    ...(uri ? { uri } : {}), ...(message ? { message } : {}), ...(position ? { position } : {}),
  });
  const file = result.file ? path.basename(result.file) : "workspace";
  await ctx.docs.showMarkdown(`injection/${file}.md`, result.markdown ?? "Nothing would be injected.");
  return result;
}

export async function openSkill(arg?: unknown): Promise<void> {
  if (isNode(arg) && (arg.type === "skill" || arg.type === "problem") && arg.path) {
    const line = arg.type === "problem" && arg.line !== undefined ? Math.max(0, arg.line - 1) : 0;
    const doc = await vscode.workspace.openTextDocument(vscode.Uri.file(arg.path));
    await vscode.window.showTextDocument(doc, { selection: new vscode.Range(line, 0, line, 0), preview: true });
  }
}
