/**
 * The Review view: conflicts (side-by-side diff), snapshot and branch merges (diff preview), stale anchors,
 * overrides, pending agent memories and flagged secrets; each resolvable from its inline buttons.
 */
import type * as vscode from "vscode";

import { Commands, Requests } from "../common/constants";
import type { ReviewQueueResult } from "../common/protocol";
import type { MnemoServer } from "../common/server";
import type { TreeNode } from "./model";
import { buildReviewTree } from "./model";
import { NodeTreeProvider } from "./tree";

export class ReviewProvider extends NodeTreeProvider {
  private count = 0;

  constructor(server: MnemoServer) {
    super(server, "Review");
  }

  protected async load(): Promise<TreeNode[]> {
    const result = await this.server.request<ReviewQueueResult>(Requests.reviewQueue, { limit: 200 });
    const items = result.items ?? [];
    this.count = items.length;
    return buildReviewTree(items, Date.now() / 1000);
  }

  protected override afterLoad(): void {
    if (this.view) {
      this.view.badge = this.count ? { value: this.count, tooltip: `${this.count} to review` } : undefined;
      this.view.description = this.count ? String(this.count) : "";
    }
  }

  protected override clickCommand(node: TreeNode): vscode.Command | undefined {
    if (node.type === "review") {
      return { title: "Show Diff", command: Commands.reviewShowDiff, arguments: [node] };
    }
    return undefined;
  }
}
