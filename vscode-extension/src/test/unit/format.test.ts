import { describe, test } from "node:test";
import * as assert from "node:assert/strict";

import {
  branchDiffMarkdown, describePublish, describeReport, describeStatus, describeWrite, parseTags, publishPreview,
  snapshotDiffSides, summarizeSnapshotDiff,
} from "../../common/format";

describe("describeStatus", () => {
  test("running: branch, active skills, state", () => {
    const v = describeStatus("running", { state: "ready", branch: "feature/x", activeSkillCount: 2,
                                          project: { name: "pay" } }, undefined);
    assert.equal(v.text, "$(git-branch) feature/x · $(zap) 2 skills");
    assert.equal(v.detail, "Mnemo ready · pay");
    assert.equal(v.severity, "information");
  });

  test("one skill is singular; the store unavailable is a warning with the hint", () => {
    assert.match(describeStatus("running", { state: "ready", branch: "main", activeSkillCount: 1 }, undefined).text,
                 /1 skill$/);
    const v = describeStatus("running", { state: "unavailable", branch: "main", reason: "owner gone",
                                          hint: "run mnemo doctor" }, undefined);
    assert.equal(v.severity, "warning");
    assert.equal(v.detail, "owner gone — run mnemo doctor");
  });

  test("failed and restricted say why", () => {
    assert.equal(describeStatus("failed", undefined, "Mnemo is not installed").detail, "Mnemo is not installed");
    assert.equal(describeStatus("failed", undefined, undefined).severity, "error");
    assert.match(describeStatus("restricted", undefined, undefined).detail, /not trusted/);
    assert.ok(describeStatus("starting", undefined, undefined).busy);
  });
});

describe("describeWrite", () => {
  test("each remember outcome has its own words", () => {
    assert.equal(describeWrite("created", 1), "Remembered");
    assert.match(describeWrite("confirmed", 3), /confirmed 3x/);
    assert.match(describeWrite("conflict", 1), /conflicts.*Review/);
    assert.match(describeWrite("pending", 1), /Review/);
  });
});

describe("snapshot import preview", () => {
  const diff = {
    snapshot: { file: "team.mnemo" },
    imported: 1, conflicts: 1, skipped_duplicates: 2,
    new: [{ op: "insert", id: "mem-b", text: "new note", scope: "project", branch: "main", reason: "new" }],
    conflict_details: [{ op: "replace", id: "mem-a", text: "remote text", scope: "project", branch: "main",
                         reason: "took remote (remote is newer)", local: { id: "mem-a", text: "local text" } }],
  };

  test("one-line summary", () => {
    assert.equal(summarizeSnapshotDiff(diff), "1 new · 1 conflict · 2 duplicates skipped");
    assert.equal(summarizeSnapshotDiff({}), "0 new · 0 conflicts · 0 duplicates skipped");
  });

  test("two aligned sides: conflicts show both texts, new ones are absent here", () => {
    const { here, incoming } = snapshotDiffSides(diff);
    assert.match(here, /## mem-a[\s\S]*local text[\s\S]*## mem-b[\s\S]*\(not in this store\)/);
    assert.match(incoming, /## mem-a[\s\S]*remote text[\s\S]*## mem-b[\s\S]*new note/);
    assert.equal(here.split("\n## ").length, incoming.split("\n## ").length);
  });

  test("branch merge preview lists what would be copied and superseded", () => {
    const md = branchDiffMarkdown({ source: "feature/x", target: "main", imported: 1, supersedes: 1,
                                    new: [{ id: "m1", text: "retry\non 5xx" }],
                                    superseded: [{ by: "m1", memory: { id: "m0", text: "never retry" } }] });
    assert.match(md, /`feature\/x` into `main`/);
    assert.match(md, /- retry on 5xx \(m1\)/);
    assert.match(md, /~~never retry~~/);
  });
});

describe("describeReport", () => {
  test("numbers as they are, lists by length, objects left out", () => {
    assert.equal(describeReport({ scanned: 9, decayed: 2, moved_to_cold: [{}], tiers: { hot: 1 } }),
                 "scanned 9 · decayed 2 · moved to cold 1");
    assert.equal(describeReport({ merged: [], summarized: [1, 2], tier_moves: [] }),
                 "merged 0 · summarized 2 · tier moves 0");
    assert.equal(describeReport({}), "");
    assert.equal(describeReport({ now: 1796038288.18, half_life_hours: 168, tombstone_threshold: 0.05, scanned: 4 }),
                 "scanned 4");
  });
});

describe("parseTags", () => {
  test("comma-separated, trimmed, blanks and repeats dropped, order kept", () => {
    assert.deepEqual(parseTags(" payments, http ,, payments,retries "), ["payments", "http", "retries"]);
    assert.deepEqual(parseTags(""), []);
  });
});

describe("publish to agent files", () => {
  const report = {
    dry_run: true, targets: ["claude", "cursor"], published: 2,
    files: [{ path: "CLAUDE.md", tool: "Claude Code", status: "changed", memories: 2 },
            { path: ".cursor/rules/mnemo.mdc", tool: "Cursor", status: "unchanged", memories: 2 },
            { path: ".continue/rules/mnemo.md", tool: "Continue", status: "skipped", reason: "not Mnemo's" }],
    left_out: [{ id: "mem-1", text: "wait  for\nreview", reason: "pending: waiting in `mnemo review`" }],
    sync: { edited: [{ id: "mem-2" }], removed: [], added: [{ text: "x" }] },
    diff: "--- a/CLAUDE.md\n+++ b/CLAUDE.md\n@@ -1 +1,2 @@\n x\n+- new\n",
  };

  test("the preview is a diff with a comment header: files, hand edits, what is left out and why", () => {
    const text = publishPreview(report);
    assert.match(text, /^# Mnemo: publish 2 memories to claude, cursor\n# 1 file\(s\) would change, 2 unchanged/);
    assert.match(text, /# {3}changed {3}CLAUDE.md \(Claude Code\)/);
    assert.match(text, /# {3}skipped {3}.continue\/rules\/mnemo.md \(Continue\) - not Mnemo's/);
    assert.match(text, /# hand edits read back first: 1 edited · 0 deleted \(to Review\) · 1 added/);
    assert.match(text, /# left out mem-1: wait for review \(pending: waiting in `mnemo review`\)/);
    assert.ok(text.endsWith(report.diff));
  });

  test("no change says so; the result line counts the files written", () => {
    assert.match(publishPreview({ files: [], diff: "" }), /# no change$/);
    assert.equal(describePublish({ published: 3, written: ["CLAUDE.md"] }), "Published 3 memories: 1 file written.");
    assert.equal(describePublish({ published: 3, written: [] }),
                 "Published 3 memories: every agent file already up to date.");
  });
});
