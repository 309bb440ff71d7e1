/**
 * What every command group shares: the context a command runs in (server, views, documents, the refresh after a
 * write) and the readers of a command's argument (a tree node, the server's params object, a bare id or path).
 */
import * as vscode from "vscode";

import { Requests } from "../common/constants";
import type { MnemoDocuments } from "../common/documents";
import type { ListMemoriesResult, Memory } from "../common/protocol";
import type { MnemoServer } from "../common/server";
import type { MemoriesProvider } from "../views/memories";
import type { TreeNode } from "../views/model";
import { firstLine } from "../views/model";
import type { ReviewProvider } from "../views/review";
import type { SkillsProvider } from "../views/skills";

export interface Views {
  memories: MemoriesProvider;
  skills: SkillsProvider;
  review: ReviewProvider;
}

/** What a command needs: `common/commands.ts` (`CommandHandlers`) provides it. */
export interface CommandContext {
  readonly server: MnemoServer;
  readonly views: Views;
  readonly docs: MnemoDocuments;
  refreshAll(): Promise<void>;
  /** Tells the server (`mnemo/memoriesChanged`) and refreshes the views. */
  afterWrite(reason: string, ids: string[]): Promise<void>;
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function isNode(value: unknown): value is TreeNode {
  return isObject(value) && typeof value.type === "string" && typeof value.id === "string" && "label" in value;
}

/** The memory id a command was invoked for: a tree node, `{id}` from the server, or a bare id. */
export function memoryIdOf(arg: unknown): string | undefined {
  if (typeof arg === "string") {
    return arg;
  }
  if (isNode(arg) && arg.type === "memory") {
    return (arg).memory.id;
  }
  if (isObject(arg) && typeof arg.id === "string") {
    return arg.id;
  }
  return undefined;
}

export function pathOf(arg: unknown): string | undefined {
  if (typeof arg === "string") {
    return arg;
  }
  if (arg instanceof vscode.Uri) {
    return arg.fsPath;
  }
  if (isObject(arg) && typeof arg.path === "string") {
    return arg.path;
  }
  return undefined;
}

/** Asks for a memory when a command was run from the palette. */
async function pickMemory(ctx: CommandContext, title: string,
                          scope: "project" | "hybrid"): Promise<Memory | undefined> {
  const result = await ctx.server.request<ListMemoriesResult>(Requests.listMemories, { scope, limit: 500 });
  const picked = await vscode.window.showQuickPick(
    (result.memories ?? []).map((m) => ({
      label: firstLine(m.text, 90), description: [m.scope, m.branch ?? "", m.kind].filter(Boolean).join(" · "),
      detail: m.id, memory: m,
    })),
    { title, matchOnDescription: true, matchOnDetail: true, placeHolder: "Choose a memory" });
  return picked?.memory;
}

/** The memory a command is about: from its argument, else picked from a list. */
export async function memoryArg(ctx: CommandContext, arg: unknown, title: string,
                                scope: "project" | "hybrid"): Promise<string | undefined> {
  return memoryIdOf(arg) ?? (await pickMemory(ctx, title, scope))?.id;
}
