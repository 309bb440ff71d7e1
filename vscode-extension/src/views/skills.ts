/**
 * The Skills view: what is active for the current editor (score and why), every skill with its source format, and
 * the problems `skills check` reports.
 */
import * as vscode from "vscode";

import { Commands, Requests } from "../common/constants";
import type { ActiveSkillsResult, SkillsResult } from "../common/protocol";
import type { MnemoServer } from "../common/server";
import type { TreeNode } from "./model";
import { buildSkillsTree } from "./model";
import { NodeTreeProvider } from "./tree";

export class SkillsProvider extends NodeTreeProvider {
  constructor(server: MnemoServer) {
    super(server, "Skills");
  }

  private lastFileUri: string | undefined;

  /** The active file; while a preview or diff (not a file) is focused, the last file stays the reference. */
  private activeUri(): string | undefined {
    const doc = vscode.window.activeTextEditor?.document;
    if (doc?.uri.scheme === "file") {
      this.lastFileUri = doc.uri.toString();
    } else if (this.lastFileUri && !vscode.workspace.textDocuments.some((d) => d.uri.toString() === this.lastFileUri)) {
      this.lastFileUri = undefined;
    }
    return this.lastFileUri;
  }

  protected async load(): Promise<TreeNode[]> {
    const uri = this.activeUri();
    const [active, all] = await Promise.all([
      uri ? this.server.request<ActiveSkillsResult>(Requests.activeSkills, { uri })
        : Promise.resolve<ActiveSkillsResult>({ activations: [] }),
      this.server.request<SkillsResult>(Requests.skills, { check: true }),
    ]);
    if (this.view) {
      const count = active.activations.length;
      this.view.description = uri ? `${count} active` : "";
    }
    return buildSkillsTree(active, all);
  }

  protected override clickCommand(node: TreeNode): vscode.Command | undefined {
    if ((node.type === "skill" || node.type === "problem") && node.path) {
      return { title: "Open Skill", command: Commands.openSkill, arguments: [node] };
    }
    return undefined;
  }
}
