/**
 * Pure wording for the status item and messages (unit-tested without VS Code).
 */
import type { StateChanged } from "./protocol";

export type ClientStateName = "stopped" | "restricted" | "starting" | "running" | "failed";

export type Severity = "information" | "warning" | "error";

export interface StatusView {
  /** The item's text (may use codicons). */
  text: string;
  /** The smaller line under it. */
  detail: string;
  severity: Severity;
  busy: boolean;
}

/** What the language status item shows: the branch, the number of active skills and the server state. */
export function describeStatus(client: ClientStateName, server: StateChanged | undefined,
                               problem: string | undefined): StatusView {
  switch (client) {
    case "restricted":
      return { text: "$(shield) Mnemo: restricted", detail: "workspace not trusted", severity: "warning", busy: false };
    case "stopped":
      return { text: "$(circle-slash) Mnemo: stopped", detail: "", severity: "warning", busy: false };
    case "failed":
      return { text: "$(error) Mnemo: not running", detail: problem ?? "see the logs", severity: "error", busy: false };
    case "starting":
      return { text: "$(sync~spin) Mnemo: starting", detail: "", severity: "information", busy: true };
    case "running":
      break;
  }
  const branch = server?.branch ? `$(git-branch) ${server.branch}` : "$(git-branch) no branch";
  const count = server?.activeSkillCount ?? server?.activeSkills?.length ?? 0;
  const skills = `${count} skill${count === 1 ? "" : "s"}`;
  const state = server?.state ?? "starting";
  if (state === "unavailable") {
    return {
      text: `${branch} · $(warning) store unavailable`,
      detail: [server?.reason, server?.hint].filter(Boolean).join(" — "),
      severity: "warning",
      busy: false,
    };
  }
  return {
    text: `${branch} · $(zap) ${skills}`,
    detail: state === "ready" ? `Mnemo ready${server?.project?.name ? ` · ${server.project.name}` : ""}`
      : "Mnemo connecting to the store",
    severity: "information",
    busy: state === "starting",
  };
}

/** "Remembered", "Already known (confirmed 3x)", "Waiting in Review" for a remember result's status. */
export function describeWrite(status: string | undefined, confirmations: number | undefined): string {
  switch (status) {
    case "confirmed":
      return `Already remembered — confirmed ${confirmations ?? 2}x`;
    case "conflict":
      return "Saved for review: it conflicts with a memory you already have (see Review)";
    case "pending":
      return "Saved for review: it waits for your confirmation (see Review)";
    case "created":
    case undefined:
      return "Remembered";
    default:
      return `Remembered (${status})`;
  }
}

/**
 * One entry of a snapshot or branch diff (the owner's `snapshot_diff` / `branch_diff`).
 * @owner SnapshotAction|BriefMemory
 */
export interface DiffEntry {
  op?: string;
  id: string;
  text: string;
  scope?: string;
  branch?: string | null;
  reason?: string;
  local?: { id: string; text: string; updated_at?: number } | null;
}

/**
 * The owner's `snapshot_diff` result, as far as the preview uses it.
 * @owner SnapshotMergeReport
 */
export interface SnapshotDiff {
  strategy?: string;
  snapshot?: { file?: string; created_at?: number; source?: { project_name?: string; branch?: string | null };
               counts?: { memories?: number } };
  imported?: number;
  replaced?: number;
  skipped_duplicates?: number;
  skipped_forgotten?: number;
  conflicts?: number;
  changes?: number;
  conflict_details?: DiffEntry[];
  new?: DiffEntry[];
}

/** One line that says what a merge would do: "3 new · 1 conflict · 2 duplicates skipped". */
export function summarizeSnapshotDiff(diff: SnapshotDiff): string {
  const parts = [
    `${diff.imported ?? 0} new`,
    `${diff.conflicts ?? 0} conflict${diff.conflicts === 1 ? "" : "s"}`,
    `${diff.skipped_duplicates ?? 0} duplicate${diff.skipped_duplicates === 1 ? "" : "s"} skipped`,
  ];
  if (diff.skipped_forgotten) {
    parts.push(`${diff.skipped_forgotten} forgotten here`);
  }
  return parts.join(" · ");
}

function block(id: string, text: string | undefined, note: string): string {
  return `## ${id}\n${note}\n\n${text === undefined ? "(not in this store)" : text.trim()}\n`;
}

/**
 * The two sides of the import preview diff: what this store holds and what the snapshot brings, memory by
 * memory (new ones are absent on the left; conflicts show both texts), in a stable order.
 */
export function snapshotDiffSides(diff: SnapshotDiff): { here: string; incoming: string } {
  const entries = [...(diff.conflict_details ?? []), ...(diff.new ?? [])]
    .sort((a, b) => (a.local ? 0 : 1) - (b.local ? 0 : 1) || a.id.localeCompare(b.id));
  const file = diff.snapshot?.file ?? "snapshot";
  // The same heading on both sides, so the diff highlights only what the import changes.
  const head = `# Import of ${file}\n\n${summarizeSnapshotDiff(diff)}\n\n`;
  const here = [head];
  const incoming = [head];
  for (const e of entries) {
    const where = [e.scope, e.branch].filter(Boolean).join(" · ");
    here.push(block(e.local?.id ?? e.id, e.local?.text, e.local ? where : ""));
    incoming.push(block(e.local?.id ?? e.id, e.text, [where, e.reason].filter(Boolean).join(" — ")));
  }
  return { here: here.join("\n"), incoming: incoming.join("\n") };
}

/**
 * The owner's `branch_diff` result, as far as the preview uses it.
 * @owner BranchMergeReport
 */
export interface BranchDiff {
  source?: string;
  target?: string;
  imported?: number;
  skipped_duplicates?: number;
  skipped_pending?: number;
  supersedes?: number;
  new?: DiffEntry[];
  superseded?: { by: string; memory: DiffEntry }[];
}

export function branchDiffMarkdown(diff: BranchDiff): string {
  const lines = [`# Merge memories of \`${diff.source ?? "?"}\` into \`${diff.target ?? "?"}\``, "",
                 `${diff.imported ?? 0} to copy · ${diff.supersedes ?? 0} superseding · ` +
                 `${diff.skipped_duplicates ?? 0} duplicates skipped · ${diff.skipped_pending ?? 0} pending skipped`,
                 ""];
  if (diff.new?.length) {
    lines.push("## New on the target", "");
    for (const e of diff.new) {
      lines.push(`- ${e.text.replace(/\s+/g, " ").trim()} (${e.id})`);
    }
    lines.push("");
  }
  if (diff.superseded?.length) {
    lines.push("## Superseded on the target", "");
    for (const s of diff.superseded) {
      lines.push(`- ~~${s.memory.text.replace(/\s+/g, " ").trim()}~~ (replaced by ${s.by})`);
    }
  }
  return lines.join("\n");
}

/**
 * One line from a lifecycle report (decay, compaction): numbers as they are, lists by their length, nested
 * objects left out. `{"scanned": 9, "decayed": 2, "moved_to_cold": [..1..]}` -> "scanned 9 · decayed 2 · moved to
 * cold 1".
 */
export function describeReport(report: Record<string, unknown>, max = 6): string {
  const parts: string[] = [];
  // Counts only: not the clock, the half-life or thresholds the report also echoes.
  const notACount = /^(now|.*_at|.*hours?|.*threshold.*|.*seconds?|.*_ms)$/;
  for (const [key, value] of Object.entries(report)) {
    if (notACount.test(key)) {
      continue;
    }
    const count = typeof value === "number" ? value : Array.isArray(value) ? value.length : undefined;
    if (count !== undefined && Number.isInteger(count)) {
      parts.push(`${key.replace(/_/g, " ")} ${count}`);
    }
  }
  return parts.slice(0, max).join(" · ");
}

/**
 * The owner's `publish` result, as far as the sidebar's "Publish to agent files" uses it.
 * @owner PublishReport
 */
export interface PublishReport {
  dry_run?: boolean;
  targets?: string[];
  files?: PublishedFile[];
  published?: number;
  written?: string[];
  left_out?: { id: string; text?: string; reason: string }[];
  sync?: Record<string, unknown[]>;
  diff?: string;
}

/** @owner PublishedFile */
export interface PublishedFile {
  path: string;
  tool?: string;
  status: string;
  memories?: number;
  reason?: string;
}

/**
 * The preview of a publish: a unified diff (what each agent file gets) with a comment header of what the hand
 * edits would do and what was left out and why. Read-only text shown as a `diff` document.
 */
export function publishPreview(report: PublishReport): string {
  const files = report.files ?? [];
  const changed = files.filter((f) => f.status === "new" || f.status === "changed");
  const lines = [`# Mnemo: publish ${report.published ?? 0} memories to ${(report.targets ?? []).join(", ") || "no target"}`,
                 `# ${changed.length} file(s) would change, ${files.length - changed.length} unchanged or skipped`];
  for (const f of files) {
    lines.push(`#   ${f.status.padEnd(9)} ${f.path}${f.tool ? ` (${f.tool})` : ""}${f.reason ? ` - ${f.reason}` : ""}`);
  }
  const sync = report.sync ?? {};
  const count = (k: string): number => (Array.isArray(sync[k]) ? sync[k].length : 0);
  if (count("edited") + count("removed") + count("added") > 0) {
    lines.push(`# hand edits read back first: ${count("edited")} edited · ${count("removed")} deleted (to Review) · ` +
               `${count("added")} added`);
  }
  for (const d of report.left_out ?? []) {
    lines.push(`# left out ${d.id}: ${(d.text ?? "").replace(/\s+/g, " ")} (${d.reason})`);
  }
  lines.push("", report.diff?.trim() ? report.diff : "# no change");
  return lines.join("\n");
}

/** One line after a publish: "Published 5 memories: 3 files written." */
export function describePublish(report: PublishReport): string {
  const written = report.written?.length ?? 0;
  return `Published ${report.published ?? 0} memories: ${written === 0 ? "every agent file already up to date"
    : `${written} file${written === 1 ? "" : "s"} written`}.`;
}

/** The tags typed in the Edit box: "a, b ,c" -> ["a", "b", "c"] (blanks and repeats dropped, order kept). */
export function parseTags(text: string): string[] {
  return [...new Set(text.split(",").map((t) => t.trim()).filter((t) => t.length > 0))];
}
