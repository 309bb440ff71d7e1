/** Review: resolve an item (picked, the first offered, or the "no" one), show what an item is about. */
import * as path from "node:path";
import * as vscode from "vscode";

import { Requests, ServerCommands } from "../common/constants";
import type { BranchDiff, SnapshotDiff } from "../common/format";
import { branchDiffMarkdown, snapshotDiffSides } from "../common/format";
import type { ReviewItem } from "../common/protocol";
import { firstLine } from "../views/model";
import type { CommandContext } from "./shared";
import { isNode, isObject } from "./shared";

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

function reviewItemOf(arg: unknown): ReviewItem | undefined {
  if (isNode(arg) && arg.type === "review") {
    return (arg).item;
  }
  if (isObject(arg) && (typeof arg.id === "number" || typeof arg.id === "string") && typeof arg.kind === "string") {
    return arg as unknown as ReviewItem;
  }
  return undefined;
}

export async function resolveReview(ctx: CommandContext, arg?: unknown, pick?: "first" | "negative"): Promise<unknown> {
  const item = reviewItemOf(arg);
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
  const result = await ctx.server.command(ServerCommands.resolveReview, { id: item.id, resolution: action });
  await ctx.afterWrite("review", [item.item_id, item.other_id].filter((x): x is string => typeof x === "string"));
  vscode.window.setStatusBarMessage(`Mnemo: ${item.kind.replace(/_/g, " ")} resolved (${action})`, 4000);
  return result;
}

export async function showReviewDiff(ctx: CommandContext, arg?: unknown): Promise<void> {
  const item = reviewItemOf(arg);
  if (!item) {
    return;
  }
  if ((item.kind === "conflict" || item.kind === "override") && item.item && item.other) {
    const label = item.kind === "conflict" ? "existing ↔ new" : `${item.other.scope} ↔ ${item.item.scope}`;
    await ctx.docs.showDiff(
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
    await ctx.docs.showDiff({ path: `review/${String(item.id)}/before.md`, text: sides.here },
                             { path: `review/${String(item.id)}/imported.md`, text: sides.incoming },
                             `Mnemo import of ${payload.file ?? "a snapshot"}`);
    return;
  }
  if (item.kind === "branch_merge") {
    const source = (item.payload as { source?: string } | undefined)?.source;
    if (source) {
      const diff = await ctx.server.request<BranchDiff>(Requests.branchDiff, { branch: source });
      await ctx.docs.showMarkdown(`branch-merge/${source.replace(/[\\/]/g, "-")}.md`, branchDiffMarkdown(diff));
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
    await ctx.docs.showMarkdown(`review/${String(item.id)}.md`,
                                 `# ${item.summary ?? item.kind}\n\n${item.item.text}\n\n${item.help ?? ""}\n`);
  }
}
