/**
 * Sharing: export a snapshot, import one (a diff first, then the conflict strategy; nothing is written before that
 * choice), merge another branch's memories into this one.
 */
import * as path from "node:path";
import * as vscode from "vscode";

import { Requests, ServerCommands } from "../common/constants";
import type { BranchDiff, PublishReport, SnapshotDiff } from "../common/format";
import {
  branchDiffMarkdown, describePublish, publishPreview, snapshotDiffSides, summarizeSnapshotDiff,
} from "../common/format";
import type { ListMemoriesResult, MergedBranchesResult, MergeStrategy } from "../common/protocol";
import { MERGE_STRATEGIES } from "../common/protocol";
import type { CommandContext } from "./shared";
import { isNode, isObject, pathOf } from "./shared";

const STRATEGY_HELP: Record<MergeStrategy, string> = {
  newer_wins: "on a conflict, the more recently updated memory wins",
  local_wins: "on a conflict, keep what this store has",
  remote_wins: "on a conflict, take the snapshot's version",
  keep_both: "on a conflict, keep both (the snapshot's as a copy)",
};

function defaultSnapshotUri(): vscode.Uri | undefined {
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
  const date = new Date().toISOString().slice(0, 10);
  return folder ? vscode.Uri.joinPath(folder, `mnemo-snapshot-${date}.mnemo`) : undefined;
}

export async function exportSnapshot(ctx: CommandContext, arg?: unknown): Promise<unknown> {
  let target = pathOf(arg);
  if (!target) {
    const uri = await vscode.window.showSaveDialog({
      title: "Mnemo: Export Snapshot", saveLabel: "Export",
      ...(defaultSnapshotUri() ? { defaultUri: defaultSnapshotUri() } : {}),
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
    () => ctx.server.command<{ path?: string; memories?: number; bytes?: number }>(
      ServerCommands.snapshotExport, params));
  void vscode.window.showInformationMessage(
    `Exported ${result.memories ?? 0} memories to ${result.path ?? target}.`);
  return result;
}

/**
 * Import Snapshot: choose a file, see what merging it would do (a diff of this store against the snapshot), then
 * choose a conflict strategy; nothing is written before that choice.
 */
export async function importSnapshot(ctx: CommandContext, arg?: unknown, presetStrategy?: unknown): Promise<unknown> {
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
    () => ctx.server.command<SnapshotDiff>(ServerCommands.snapshotDiff, { path: source }));
  const sides = snapshotDiffSides(diff);
  const file = path.basename(source);
  await ctx.docs.showDiff({ path: `snapshot/${file}/this-store.md`, text: sides.here },
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
    () => ctx.server.command<SnapshotDiff>(ServerCommands.snapshotMerge, { path: source, strategy }));
  await ctx.afterWrite("snapshot", []);
  void vscode.window.showInformationMessage(`Imported ${file} (${strategy}): ${summarizeSnapshotDiff(result)}.`);
  return result;
}

export async function mergeBranch(ctx: CommandContext, arg?: unknown): Promise<unknown> {
  let branch = typeof arg === "string" ? arg : isObject(arg) && typeof arg.branch === "string" ? arg.branch
    : undefined;
  if (!branch) {
    const list = await ctx.server.request<ListMemoriesResult>(Requests.listMemories,
                                                                { scope: "project", allBranches: true, limit: 1000 });
    const current = list.branch ?? ctx.server.serverState?.branch;
    const counts = new Map<string, number>();
    for (const m of list.memories ?? []) {
      if (m.branch && m.branch !== current) {
        counts.set(m.branch, (counts.get(m.branch) ?? 0) + 1);
      }
    }
    // Branches git already shows merged into the default branch come first: their memories are due.
    const merged = await ctx.server.request<MergedBranchesResult>(Requests.mergedBranches, {})
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
  const diff = await ctx.server.request<BranchDiff>(Requests.branchDiff, { branch });
  await ctx.docs.showMarkdown(`branch-merge/${branch.replace(/[\\/]/g, "-")}.md`, branchDiffMarkdown(diff));
  const go = await vscode.window.showInformationMessage(
    `Merge ${diff.imported ?? 0} ${diff.imported === 1 ? "memory" : "memories"} of ${branch} into ` +
    `${diff.target ?? "this branch"}?`, "Merge");
  if (go !== "Merge") {
    return diff;
  }
  const result = await ctx.server.command(ServerCommands.branchMerge, { branch });
  await ctx.afterWrite("branch", []);
  void vscode.window.showInformationMessage(`Merged the memories of ${branch}.`);
  return result;
}

/**
 * Publish to agent files: the dry run first (its unified diff in an editor, with what the hand edits would do and
 * what is left out and why), then, on "Publish", the same publish for real. Nothing is written before the choice.
 */
export async function publishAgentFiles(ctx: CommandContext): Promise<unknown> {
  const preview = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: "Mnemo: preparing the agent files…" },
    () => ctx.server.command<PublishReport>(ServerCommands.publish, { dryRun: true }));
  await ctx.docs.showUnifiedDiff("publish/agent-files.diff", publishPreview(preview));
  const changed = (preview.files ?? []).filter((f) => f.status === "new" || f.status === "changed").length;
  const edits = Object.values(preview.sync ?? {}).reduce((n, v) => n + (Array.isArray(v) ? v.length : 0), 0);
  if (changed === 0 && edits === 0) {
    void vscode.window.showInformationMessage("Mnemo: every agent file is up to date.");
    return preview;
  }
  const choice = await vscode.window.showInformationMessage(
    `Publish ${preview.published ?? 0} reviewed memories to ${changed} agent file(s)?`, { modal: true }, "Publish");
  if (choice !== "Publish") {
    return undefined;
  }
  const result = await ctx.server.command<PublishReport>(ServerCommands.publish, {});
  void vscode.window.showInformationMessage(describePublish(result));
  return result;
}
