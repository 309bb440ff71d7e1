/**
 * The command palette, context-menu and view-title commands. Each one works from the palette (it asks for what
 * it needs), from a tree item (it takes the node) and from the server's code actions and code lenses (it takes
 * the server's params object and forwards it), then shows the result and refreshes the views.
 */
import * as path from "node:path";
import * as vscode from "vscode";

import type { MemoriesProvider } from "../views/memories";
import type { TreeNode } from "../views/model";
import { firstLine } from "../views/model";
import type { ReviewProvider } from "../views/review";
import type { SkillsProvider } from "../views/skills";
import { Commands, Requests, ServerCommands } from "./constants";
import type { MnemoDocuments } from "./documents";
import type { BranchDiff, SnapshotDiff } from "./format";
import {
  branchDiffMarkdown, describeReport, describeWrite, snapshotDiffSides, summarizeSnapshotDiff,
} from "./format";
import { logger } from "./logger";
import type {
  InjectionPreview, ListMemoriesResult, Memory, MergedBranchesResult, MergeStrategy, ReviewItem, WriteResult,
} from "./protocol";
import { MERGE_STRATEGIES } from "./protocol";
import type { MnemoServer } from "./server";
import { MnemoRequestError } from "./server";

export interface Views {
  memories: MemoriesProvider;
  skills: SkillsProvider;
  review: ReviewProvider;
}

const KINDS = ["fact", "decision", "lesson", "pattern", "handoff"];

const STRATEGY_HELP: Record<MergeStrategy, string> = {
  newer_wins: "on a conflict, the more recently updated memory wins",
  local_wins: "on a conflict, keep what this store has",
  remote_wins: "on a conflict, take the snapshot's version",
  keep_both: "on a conflict, keep both (the snapshot's as a copy)",
};

const RESOLUTION_HELP: Record<string, string> = {
  supersede: "the new memory replaces the old one (kept in history)",
  keep_both: "keep both memories",
  keep_existing: "keep the old memory; the new one is rejected",
  accept: "accept",
  reject: "reject: it stays out of recall (kept in history)",
  update: "re-anchor to the current code",
  deprecate: "deprecate the memory",
  dismiss: "dismiss this entry",
  merge: "merge the branch's memories into the default branch",
};

/** Resolutions that say "no" to an item, in order of preference, for the one-click reject button. */
const NEGATIVE = ["keep_existing", "reject", "dismiss", "deprecate"];

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isNode(value: unknown): value is TreeNode {
  return isObject(value) && typeof value.type === "string" && typeof value.id === "string" && "label" in value;
}

/** The memory id a command was invoked for: a tree node, `{id}` from the server, or a bare id. */
function memoryIdOf(arg: unknown): string | undefined {
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

function pathOf(arg: unknown): string | undefined {
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

export class CommandHandlers {
  constructor(private readonly server: MnemoServer, private readonly views: Views,
              private readonly docs: MnemoDocuments) {}

  register(): vscode.Disposable[] {
    const r = (id: string, fn: (...args: unknown[]) => Promise<unknown>): vscode.Disposable =>
      vscode.commands.registerCommand(id, async (...args: unknown[]) => {
        try {
          return await fn(...args);
        } catch (error) {
          this.report(id, error);
          return undefined;
        }
      });
    return [
      r(Commands.rememberSelection, (arg) => this.rememberSelection(arg)),
      r(Commands.remember, (arg) => this.remember(arg)),
      r(Commands.promote, (arg) => this.promote(arg)),
      r(Commands.deprecate, (arg) => this.deprecate(arg)),
      r(Commands.forget, (arg) => this.forget(arg)),
      r(Commands.openMemory, (arg) => this.openMemory(arg)),
      r(Commands.copyMemory, (arg) => this.copyMemory(arg)),
      r(Commands.showInjection, (arg) => this.showInjection(arg)),
      r(Commands.exportSnapshot, (arg) => this.exportSnapshot(arg)),
      r(Commands.importSnapshot, (arg, strategy) => this.importSnapshot(arg, strategy)),
      r(Commands.mergeBranch, (arg) => this.mergeBranch(arg)),
      r(Commands.runDecay, () => this.runDecay()),
      r(Commands.compact, () => this.compact()),
      r(Commands.restart, () => this.server.restart()),
      r(Commands.showLogs, () => {
        logger.show();
        return Promise.resolve();
      }),
      r(Commands.refresh, () => this.refreshAll()),
      r(Commands.reviewResolve, (arg) => this.resolveReview(arg)),
      r(Commands.reviewAccept, (arg) => this.resolveReview(arg, "first")),
      r(Commands.reviewReject, (arg) => this.resolveReview(arg, "negative")),
      r(Commands.reviewShowDiff, (arg) => this.showReviewDiff(arg)),
      r(Commands.openSkill, (arg) => this.openSkill(arg)),
    ];
  }

  private report(command: string, error: unknown): void {
    const name = command.replace(/^mnemo\./, "");
    let message = error instanceof Error ? error.message : String(error);
    if (error instanceof MnemoRequestError && error.data?.hint && !message.includes(error.data.hint)) {
      message = `${message} — ${error.data.hint}`;
    }
    logger.error(`${command}:`, error);
    void vscode.window.showErrorMessage(`Mnemo (${name}): ${message}`, "Show Logs").then((choice) => {
      if (choice) {
        logger.show();
      }
    });
  }

  async refreshAll(): Promise<void> {
    await Promise.all([this.views.memories.refresh(), this.views.skills.refresh(), this.views.review.refresh()]);
  }

  private async afterWrite(reason: string, ids: string[]): Promise<void> {
    this.server.notifyMemoriesChanged(reason, ids);
    await this.refreshAll();
  }

  // -- remember --------------------------------------------------------------------------------------------------

  private async showWrite(result: WriteResult): Promise<void> {
    const memory = result.memory;
    await this.afterWrite("remember", memory ? [memory.id] : []);
    if (memory) {
      await this.views.memories.reveal(memory.id);
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

  async rememberSelection(arg?: unknown): Promise<WriteResult | undefined> {
    if (isObject(arg) && typeof arg.uri === "string" && isObject(arg.range)) {
      const result = await this.server.command<WriteResult>(ServerCommands.rememberSelection, arg);
      await this.showWrite(result);
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
    const result = await this.server.command<WriteResult>(ServerCommands.rememberSelection, {
      uri: editor.document.uri.toString(),
      range: { start: { line: start.line, character: start.character },
               end: { line: end.line, character: end.character } },
      text: text.trim(),
    });
    await this.showWrite(result);
    return result;
  }

  async remember(arg?: unknown): Promise<WriteResult | undefined> {
    if (isObject(arg) && typeof arg.text === "string") {
      const result = await this.server.command<WriteResult>(ServerCommands.remember, arg);
      await this.showWrite(result);
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
    const result = await this.server.command<WriteResult>(ServerCommands.remember, {
      text: text.trim(), kind, ...(uri?.scheme === "file" ? { uri: uri.toString() } : {}),
    });
    await this.showWrite(result);
    return result;
  }

  // -- promote / deprecate / forget ------------------------------------------------------------------------------

  /** Asks for a memory when a command was run from the palette. */
  private async pickMemory(title: string, scope: "project" | "hybrid"): Promise<Memory | undefined> {
    const result = await this.server.request<ListMemoriesResult>(Requests.listMemories, { scope, limit: 500 });
    const picked = await vscode.window.showQuickPick(
      (result.memories ?? []).map((m) => ({
        label: firstLine(m.text, 90), description: [m.scope, m.branch ?? "", m.kind].filter(Boolean).join(" · "),
        detail: m.id, memory: m,
      })),
      { title, matchOnDescription: true, matchOnDetail: true, placeHolder: "Choose a memory" });
    return picked?.memory;
  }

  private async memoryArg(arg: unknown, title: string, scope: "project" | "hybrid"): Promise<string | undefined> {
    return memoryIdOf(arg) ?? (await this.pickMemory(title, scope))?.id;
  }

  async promote(arg?: unknown): Promise<unknown> {
    const id = await this.memoryArg(arg, "Mnemo: Promote a project memory to global", "project");
    if (!id) {
      return undefined;
    }
    const to = isObject(arg) && typeof arg.to === "string" ? arg.to : "global";
    const result = await this.server.command<WriteResult>(ServerCommands.promote, { id, to });
    await this.afterWrite("promote", [id, result.memory?.id ?? id]);
    if (result.memory) {
      await this.views.memories.reveal(result.memory.id);
    }
    void vscode.window.showInformationMessage(
      `Promoted to ${to}${result.memory ? `: “${firstLine(result.memory.text, 60)}”` : ""}`);
    return result;
  }

  async deprecate(arg?: unknown): Promise<unknown> {
    const id = await this.memoryArg(arg, "Mnemo: Deprecate a memory", "hybrid");
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
    const result = await this.server.command<WriteResult>(ServerCommands.deprecate,
                                                          reason ? { id, reason } : { id });
    await this.afterWrite("deprecate", [id]);
    void vscode.window.showInformationMessage("Deprecated: it no longer appears in recall.");
    return result;
  }

  async forget(arg?: unknown): Promise<unknown> {
    const id = await this.memoryArg(arg, "Mnemo: Forget a memory", "hybrid");
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
    const result = await this.server.command(ServerCommands.forget, { id });
    await this.afterWrite("forget", [id]);
    return result;
  }

  // -- show ------------------------------------------------------------------------------------------------------

  async openMemory(arg?: unknown): Promise<unknown> {
    let params: Record<string, unknown>;
    if (isObject(arg) && !isNode(arg) && (Array.isArray(arg.ids) || typeof arg.id === "string")) {
      params = arg;
    } else {
      const id = await this.memoryArg(arg, "Mnemo: Open a memory", "hybrid");
      if (!id) {
        return undefined;
      }
      params = { id };
    }
    const result = await this.server.command<{ memories?: Memory[]; markdown?: string }>(
      ServerCommands.openMemory, params);
    const first = result.memories?.[0];
    const name = first ? `memory/${first.id}.md` : "memory/memories.md";
    await this.docs.showMarkdown(name, result.markdown ?? (result.memories ?? []).map((m) => m.text).join("\n\n"));
    return result;
  }

  async copyMemory(arg?: unknown): Promise<void> {
    if (isNode(arg) && arg.type === "memory") {
      await vscode.env.clipboard.writeText((arg).memory.text);
      vscode.window.setStatusBarMessage("Mnemo: memory copied", 2000);
    }
  }

  async showInjection(arg?: unknown): Promise<InjectionPreview | undefined> {
    const uri = isObject(arg) && typeof arg.uri === "string" ? arg.uri
      : vscode.window.activeTextEditor?.document.uri.scheme === "file"
        ? vscode.window.activeTextEditor.document.uri.toString() : undefined;
    const message = isObject(arg) && typeof arg.message === "string" ? arg.message : undefined;
    const editor = vscode.window.activeTextEditor;
    const position = isObject(arg) && isObject(arg.position) ? arg.position
      : editor && editor.document.uri.toString() === uri
        ? { line: editor.selection.active.line, character: editor.selection.active.character } : undefined;
    const result = await this.server.request<InjectionPreview>(Requests.injectionPreview, {
      ...(uri ? { uri } : {}), ...(message ? { message } : {}), ...(position ? { position } : {}),
    });
    const file = result.file ? path.basename(result.file) : "workspace";
    await this.docs.showMarkdown(`injection/${file}.md`, result.markdown ?? "Nothing would be injected.");
    return result;
  }

  async openSkill(arg?: unknown): Promise<void> {
    if (isNode(arg) && (arg.type === "skill" || arg.type === "problem") && arg.path) {
      const line = arg.type === "problem" && arg.line !== undefined ? Math.max(0, arg.line - 1) : 0;
      const doc = await vscode.workspace.openTextDocument(vscode.Uri.file(arg.path));
      await vscode.window.showTextDocument(doc, { selection: new vscode.Range(line, 0, line, 0), preview: true });
    }
  }

  // -- sharing ---------------------------------------------------------------------------------------------------

  private defaultSnapshotUri(): vscode.Uri | undefined {
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
    const date = new Date().toISOString().slice(0, 10);
    return folder ? vscode.Uri.joinPath(folder, `mnemo-snapshot-${date}.mnemo`) : undefined;
  }

  async exportSnapshot(arg?: unknown): Promise<unknown> {
    let target = pathOf(arg);
    if (!target) {
      const uri = await vscode.window.showSaveDialog({
        title: "Mnemo: Export Snapshot", saveLabel: "Export",
        ...(this.defaultSnapshotUri() ? { defaultUri: this.defaultSnapshotUri() } : {}),
        filters: { "Mnemo snapshot": ["mnemo", "jsonl"] },
      });
      if (!uri) {
        return undefined;
      }
      target = uri.fsPath;
    }
    const params = isObject(arg) && !isNode(arg) ? { ...arg, path: target } : { path: target };
    const result = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: "Mnemo: exporting a snapshot…" },
      () => this.server.command<{ path?: string; memories?: number; bytes?: number }>(
        ServerCommands.snapshotExport, params));
    void vscode.window.showInformationMessage(
      `Exported ${result.memories ?? 0} memories to ${result.path ?? target}.`);
    return result;
  }

  /**
   * Import Snapshot: choose a file, see what merging it would do (a diff of this store against the snapshot), then
   * choose a conflict strategy; nothing is written before that choice.
   */
  async importSnapshot(arg?: unknown, presetStrategy?: unknown): Promise<unknown> {
    let source = pathOf(arg);
    if (!source) {
      const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
      const picked = await vscode.window.showOpenDialog({
        title: "Mnemo: Import Snapshot", openLabel: "Preview Import", canSelectMany: false,
        ...(folder ? { defaultUri: folder } : {}),
        filters: { "Mnemo snapshot": ["mnemo", "jsonl"], "All files": ["*"] },
      });
      if (!picked?.[0]) {
        return undefined;
      }
      source = picked[0].fsPath;
    }
    const diff = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: "Mnemo: reading the snapshot…" },
      () => this.server.command<SnapshotDiff>(ServerCommands.snapshotDiff, { path: source }));
    const sides = snapshotDiffSides(diff);
    const file = path.basename(source);
    await this.docs.showDiff({ path: `snapshot/${file}/this-store.md`, text: sides.here },
                             { path: `snapshot/${file}/incoming.md`, text: sides.incoming },
                             `Import ${file}: this store ↔ snapshot`);
    const summary = summarizeSnapshotDiff(diff);
    let strategy: MergeStrategy | undefined;
    if (typeof presetStrategy === "string" && (MERGE_STRATEGIES as readonly string[]).includes(presetStrategy)) {
      strategy = presetStrategy as MergeStrategy;
    } else {
      const choice = await vscode.window.showQuickPick(
        MERGE_STRATEGIES.map((s) => ({ label: s, description: STRATEGY_HELP[s], strategy: s })),
        { title: `Import ${file}: ${summary}`, placeHolder: "Choose how conflicts are resolved (Esc: import nothing)",
          ignoreFocusOut: true });
      strategy = choice?.strategy;
    }
    if (!strategy) {
      void vscode.window.showInformationMessage(`Nothing imported from ${file}.`);
      return diff;
    }
    const result = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `Mnemo: importing ${file}…` },
      () => this.server.command<SnapshotDiff>(ServerCommands.snapshotMerge, { path: source, strategy }));
    await this.afterWrite("snapshot", []);
    void vscode.window.showInformationMessage(`Imported ${file} (${strategy}): ${summarizeSnapshotDiff(result)}.`);
    return result;
  }

  async mergeBranch(arg?: unknown): Promise<unknown> {
    let branch = typeof arg === "string" ? arg : isObject(arg) && typeof arg.branch === "string" ? arg.branch
      : undefined;
    if (!branch) {
      const list = await this.server.request<ListMemoriesResult>(Requests.listMemories,
                                                                  { scope: "project", allBranches: true, limit: 1000 });
      const current = list.branch ?? this.server.serverState?.branch;
      const counts = new Map<string, number>();
      for (const m of list.memories ?? []) {
        if (m.branch && m.branch !== current) {
          counts.set(m.branch, (counts.get(m.branch) ?? 0) + 1);
        }
      }
      // Branches git already shows merged into the default branch come first: their memories are due.
      const merged = await this.server.request<MergedBranchesResult>(Requests.mergedBranches, {})
        .then((r) => new Set((r.branches ?? []).map((b) => b.branch)), () => new Set<string>());
      if (!counts.size) {
        void vscode.window.showInformationMessage(
          `No other branch has memories to merge into ${current ?? "this branch"}.`);
        return undefined;
      }
      const picked = await vscode.window.showQuickPick(
        [...counts.entries()]
          .sort(([a], [b]) => Number(merged.has(b)) - Number(merged.has(a)) || a.localeCompare(b))
          .map(([b, n]) => ({
            label: b, description: `${n} ${n === 1 ? "memory" : "memories"}${merged.has(b) ? " · merged in git" : ""}`,
            branch: b,
          })),
        { title: `Mnemo: Merge branch memory into ${current ?? "the current branch"}` });
      branch = picked?.branch;
    }
    if (!branch) {
      return undefined;
    }
    const diff = await this.server.request<BranchDiff>(Requests.branchDiff, { branch });
    await this.docs.showMarkdown(`branch-merge/${branch.replace(/[\\/]/g, "-")}.md`, branchDiffMarkdown(diff));
    const go = await vscode.window.showInformationMessage(
      `Merge ${diff.imported ?? 0} ${diff.imported === 1 ? "memory" : "memories"} of ${branch} into ` +
      `${diff.target ?? "this branch"}?`, "Merge");
    if (go !== "Merge") {
      return diff;
    }
    const result = await this.server.command(ServerCommands.branchMerge, { branch });
    await this.afterWrite("branch", []);
    void vscode.window.showInformationMessage(`Merged the memories of ${branch}.`);
    return result;
  }

  async runDecay(): Promise<unknown> {
    return this.lifecycle("decay", "running decay", ServerCommands.runDecay, "Decay done");
  }

  async compact(): Promise<unknown> {
    return this.lifecycle("compact", "compacting memory", ServerCommands.compact, "Compaction done");
  }

  private async lifecycle(reason: string, doing: string, command: string, done: string): Promise<unknown> {
    const result = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `Mnemo: ${doing}…` },
      () => this.server.command<Record<string, unknown>>(command, {}));
    await this.afterWrite(reason, []);
    const counts = describeReport(result);
    void vscode.window.showInformationMessage(`${done}${counts ? `: ${counts}` : ""}.`);
    return result;
  }

  // -- review ----------------------------------------------------------------------------------------------------

  private reviewItemOf(arg: unknown): ReviewItem | undefined {
    if (isNode(arg) && arg.type === "review") {
      return (arg).item;
    }
    if (isObject(arg) && (typeof arg.id === "number" || typeof arg.id === "string") && typeof arg.kind === "string") {
      return arg as unknown as ReviewItem;
    }
    return undefined;
  }

  async resolveReview(arg?: unknown, pick?: "first" | "negative"): Promise<unknown> {
    const item = this.reviewItemOf(arg);
    if (!item) {
      await vscode.commands.executeCommand("mnemo.review.focus");
      return undefined;
    }
    const offered = item.resolutions ?? [];
    let action: string | undefined;
    if (pick === "first") {
      action = offered[0];
    } else if (pick === "negative") {
      action = NEGATIVE.find((n) => offered.includes(n)) ?? offered[offered.length - 1];
    } else {
      const choice = await vscode.window.showQuickPick(
        offered.map((a) => ({ label: a, description: RESOLUTION_HELP[a] ?? "", action: a })),
        { title: `Resolve: ${firstLine(item.summary ?? item.kind, 80)}`, placeHolder: item.help ?? "" });
      action = choice?.action;
    }
    if (!action) {
      return undefined;
    }
    const result = await this.server.command(ServerCommands.resolveReview, { id: item.id, resolution: action });
    await this.afterWrite("review", [item.item_id, item.other_id].filter((x): x is string => typeof x === "string"));
    vscode.window.setStatusBarMessage(`Mnemo: ${item.kind.replace(/_/g, " ")} resolved (${action})`, 4000);
    return result;
  }

  async showReviewDiff(arg?: unknown): Promise<void> {
    const item = this.reviewItemOf(arg);
    if (!item) {
      return;
    }
    if ((item.kind === "conflict" || item.kind === "override") && item.item && item.other) {
      const label = item.kind === "conflict" ? "existing ↔ new" : `${item.other.scope} ↔ ${item.item.scope}`;
      await this.docs.showDiff(
        { path: `review/${String(item.id)}/${item.other.id}.md`, text: `${item.other.text}\n` },
        { path: `review/${String(item.id)}/${item.item.id}.md`, text: `${item.item.text}\n` },
        `Mnemo ${item.kind}: ${label}`);
      return;
    }
    if (item.kind === "snapshot_merge") {
      const payload = (item.payload ?? {}) as { file?: string; summary?: Record<string, number>;
                                                conflicts?: SnapshotDiff["conflict_details"] };
      const sides = snapshotDiffSides({ ...(payload.summary ?? {}), conflict_details: payload.conflicts ?? [],
                                        snapshot: { file: payload.file ?? "snapshot" } });
      await this.docs.showDiff({ path: `review/${String(item.id)}/before.md`, text: sides.here },
                               { path: `review/${String(item.id)}/imported.md`, text: sides.incoming },
                               `Mnemo import of ${payload.file ?? "a snapshot"}`);
      return;
    }
    if (item.kind === "branch_merge") {
      const source = (item.payload as { source?: string } | undefined)?.source;
      if (source) {
        const diff = await this.server.request<BranchDiff>(Requests.branchDiff, { branch: source });
        await this.docs.showMarkdown(`branch-merge/${source.replace(/[\\/]/g, "-")}.md`, branchDiffMarkdown(diff));
      }
      return;
    }
    const anchor = item.item?.anchors?.[0] ??
      ((item.payload as { anchor?: { path?: string; start_line?: number } } | undefined)?.anchor);
    const root = vscode.workspace.workspaceFolders?.[0]?.uri;
    if (item.kind === "stale_anchor" && anchor?.path && root) {
      const uri = path.isAbsolute(anchor.path) ? vscode.Uri.file(anchor.path) : vscode.Uri.joinPath(root, anchor.path);
      try {
        const doc = await vscode.workspace.openTextDocument(uri);
        const line = Math.min(anchor.start_line ?? 0, doc.lineCount - 1);
        await vscode.window.showTextDocument(doc, { selection: new vscode.Range(line, 0, line, 0) });
      } catch {
        void vscode.window.showWarningMessage(`The anchored file ${anchor.path} is gone.`);
      }
    }
    if (item.item) {
      await this.docs.showMarkdown(`review/${String(item.id)}.md`,
                                   `# ${item.summary ?? item.kind}\n\n${item.item.text}\n\n${item.help ?? ""}\n`);
    }
  }
}
