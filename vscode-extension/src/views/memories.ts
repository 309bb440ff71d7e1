/**
 * The Memories view: memories grouped by scope, then branch, then type, with provenance in the tooltips.
 */
import type * as vscode from "vscode";

import { Commands, Requests } from "../common/constants";
import type { ListMemoriesResult } from "../common/protocol";
import type { MnemoServer } from "../common/server";
import type { TreeNode } from "./model";
import { buildMemoryTree } from "./model";
import { NodeTreeProvider } from "./tree";

export class MemoriesProvider extends NodeTreeProvider {
  private last: ListMemoriesResult | undefined;

  constructor(server: MnemoServer) {
    super(server, "Memories");
  }

  protected async load(): Promise<TreeNode[]> {
    const result = await this.server.request<ListMemoriesResult>(Requests.listMemories, {
      scope: "hybrid", limit: 500,
    });
    this.last = result;
    return buildMemoryTree(result.memories ?? [], {
      projectName: result.project?.name ?? this.server.serverState?.project?.name,
      branch: result.branch ?? this.server.serverState?.branch ?? null,
      defaultBranch: result.defaultBranch ?? this.server.serverState?.defaultBranch ?? null,
      now: Date.now() / 1000,
    });
  }

  protected override afterLoad(): void {
    if (this.view) {
      const count = this.last?.memories?.length ?? 0;
      const branch = this.last?.branch;
      this.view.description = [branch ? `${branch}` : "", count ? `${count}` : ""].filter(Boolean).join(" · ");
    }
  }

  protected override clickCommand(node: TreeNode): vscode.Command | undefined {
    if (node.type === "memory") {
      return { title: "Open Memory", command: Commands.openMemory, arguments: [node] };
    }
    return undefined;
  }

  /** Reveals and selects the memory with this id, if it is in the tree. */
  async reveal(memoryId: string): Promise<boolean> {
    const node = this.find((n) => n.type === "memory" && n.memory.id === memoryId);
    if (!node || !this.view) {
      return false;
    }
    await this.view.reveal(node, { select: true, focus: false, expand: true });
    return true;
  }
}
