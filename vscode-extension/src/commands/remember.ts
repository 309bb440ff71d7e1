/**
 * Remember: a note, or the selection anchored to the code around it (from the palette it asks for the text; from
 * the server's code action it forwards the params object), then the result and the refreshed views.
 */
import * as vscode from "vscode";

import { ServerCommands } from "../common/constants";
import { describeWrite } from "../common/format";
import type { WriteResult } from "../common/protocol";
import { firstLine } from "../views/model";
import type { CommandContext } from "./shared";
import { isObject } from "./shared";

const KINDS = ["fact", "decision", "lesson", "pattern", "handoff"];

async function showWrite(ctx: CommandContext, result: WriteResult): Promise<void> {
  const memory = result.memory;
  await ctx.afterWrite("remember", memory ? [memory.id] : []);
  if (memory) {
    await ctx.views.memories.reveal(memory.id);
  }
  const text = memory ? `: “${firstLine(memory.text, 60)}”` : "";
  const message = `${describeWrite(result.status, memory?.confirmations)}${text}`;
  if (result.status === "pending" || result.status === "conflict") {
    void vscode.window.showWarningMessage(message, "Open Review").then((choice) => {
      if (choice) {
        void vscode.commands.executeCommand("mnemo.review.focus");
      }
    });
  } else {
    void vscode.window.showInformationMessage(message);
  }
}

export async function rememberSelection(ctx: CommandContext, arg?: unknown): Promise<WriteResult | undefined> {
  if (isObject(arg) && typeof arg.uri === "string" && isObject(arg.range)) {
    const result = await ctx.server.command<WriteResult>(ServerCommands.rememberSelection, arg);
    await showWrite(ctx, result);
    return result;
  }
  const editor = vscode.window.activeTextEditor;
  if (!editor || editor.selection.isEmpty) {
    void vscode.window.showWarningMessage("Mnemo: select the code or text to remember first.");
    return undefined;
  }
  const selected = editor.document.getText(editor.selection).trim();
  const text = await vscode.window.showInputBox({
    title: "Mnemo: Remember Selection",
    prompt: "What should be remembered? It is anchored to the code around the selection.",
    value: selected.length > 2000 ? selected.slice(0, 2000) : selected,
    ignoreFocusOut: true,
    validateInput: (value) => (value.trim() ? undefined : "Write something to remember"),
  });
  if (text === undefined) {
    return undefined;
  }
  const { start, end } = editor.selection;
  const result = await ctx.server.command<WriteResult>(ServerCommands.rememberSelection, {
    uri: editor.document.uri.toString(),
    range: { start: { line: start.line, character: start.character },
             end: { line: end.line, character: end.character } },
    text: text.trim(),
  });
  await showWrite(ctx, result);
  return result;
}

export async function remember(ctx: CommandContext, arg?: unknown): Promise<WriteResult | undefined> {
  if (isObject(arg) && typeof arg.text === "string") {
    const result = await ctx.server.command<WriteResult>(ServerCommands.remember, arg);
    await showWrite(ctx, result);
    return result;
  }
  const text = await vscode.window.showInputBox({
    title: "Mnemo: Remember",
    prompt: "A short note worth keeping, e.g. “payments API needs idempotency keys on every POST”",
    ignoreFocusOut: true,
    validateInput: (value) => (value.trim() ? undefined : "Write something to remember"),
  });
  if (text === undefined) {
    return undefined;
  }
  const kind = await vscode.window.showQuickPick(KINDS, {
    title: "Mnemo: Remember — what kind of note is it?", placeHolder: "fact",
  });
  if (kind === undefined) {
    return undefined;
  }
  const uri = vscode.window.activeTextEditor?.document.uri;
  const result = await ctx.server.command<WriteResult>(ServerCommands.remember, {
    text: text.trim(), kind, ...(uri?.scheme === "file" ? { uri: uri.toString() } : {}),
  });
  await showWrite(ctx, result);
  return result;
}
