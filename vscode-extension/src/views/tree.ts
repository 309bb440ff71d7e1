/**
 * A TreeDataProvider over the plain nodes of `model.ts`: maps them to TreeItems, remembers parents (for
 * `reveal`), and shows failures as the view's message instead of an empty tree.
 */
import * as vscode from "vscode";

import { NOT_SUPPORTED, UNAVAILABLE } from "../common/constants";
import { logger } from "../common/logger";
import type { MnemoServer } from "../common/server";
import { MnemoRequestError } from "../common/server";
import type { IconSpec, TreeNode } from "./model";

export function themeIcon(spec: IconSpec | undefined): vscode.ThemeIcon | undefined {
  if (!spec) {
    return undefined;
  }
  return spec.color ? new vscode.ThemeIcon(spec.id, new vscode.ThemeColor(spec.color)) : new vscode.ThemeIcon(spec.id);
}

export function toTreeItem(node: TreeNode, clickCommand?: (node: TreeNode) => vscode.Command | undefined):
    vscode.TreeItem {
  const collapsible = node.type === "group"
    ? (node.expanded ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.Collapsed)
    : vscode.TreeItemCollapsibleState.None;
  const item = new vscode.TreeItem(node.label, collapsible);
  item.id = node.id;
  item.iconPath = themeIcon(node.icon);
  if ("description" in node && node.description !== undefined) {
    item.description = node.description;
  }
  if (node.tooltip) {
    const md = new vscode.MarkdownString(node.tooltip);
    md.supportThemeIcons = false;
    md.isTrusted = false;
    item.tooltip = md;
  }
  if ("contextValue" in node) {
    item.contextValue = node.contextValue;
  }
  const command = clickCommand?.(node);
  if (command) {
    item.command = command;
  }
  return item;
}

/** Base class of the three views. Subclasses fetch their roots; this class handles refresh, errors and parents. */
export abstract class NodeTreeProvider implements vscode.TreeDataProvider<TreeNode>, vscode.Disposable {
  private readonly changeEmitter = new vscode.EventEmitter<TreeNode | undefined>();
  readonly onDidChangeTreeData = this.changeEmitter.event;
  protected roots: TreeNode[] = [];
  private parents = new Map<string, TreeNode>();
  private loading: Promise<void> | undefined;
  private queued: Promise<void> | undefined;
  view: vscode.TreeView<TreeNode> | undefined;

  constructor(protected readonly server: MnemoServer, private readonly viewName: string) {}

  /** Builds the tree from the server's answers. */
  protected abstract load(): Promise<TreeNode[]>;

  /** What a click on a node runs. */
  protected clickCommand(_node: TreeNode): vscode.Command | undefined {
    return undefined;
  }

  /** Called after each successful load (badges, descriptions). */
  protected afterLoad(_roots: TreeNode[]): void {}

  /**
   * Reloads from the server. A call during a load queues one more load (shared by every call made meanwhile) and
   * resolves when that one is done: the load in flight may have read the store before the caller's write, and a
   * caller that awaits a refresh after a write (to reveal what it wrote) must see the write.
   */
  refresh(): Promise<void> {
    if (this.loading) {
      const next = (): Promise<void> => {
        this.queued = undefined;
        return this.refresh();
      };
      this.queued ??= this.loading.then(next, next);
      return this.queued;
    }
    this.loading = this.reload().finally(() => {
      this.loading = undefined;
    });
    return this.loading;
  }

  private async reload(): Promise<void> {
    if (this.server.state !== "running") {
      this.roots = [];
      // Say why the view is empty (Python or Mnemo missing); an untrusted workspace gets the welcome view instead,
      // with its "Manage Workspace Trust" button.
      this.setMessage(this.server.state === "failed" ? this.server.problem : undefined);
      if (this.view) {
        this.view.description = undefined;
        this.view.badge = undefined;
      }
      this.changeEmitter.fire(undefined);
      return;
    }
    const store = this.server.serverState;
    if (store?.state === "starting") {
      // The server is connecting to the owner process; `mnemo/stateChanged` triggers the next refresh.
      this.roots = [];
      this.setMessage("Connecting to Mnemo's store…");
      this.changeEmitter.fire(undefined);
      return;
    }
    if (store?.state === "unavailable") {
      this.roots = [];
      this.setMessage(`Mnemo's store is unavailable: ${[store.reason, store.hint].filter(Boolean).join(" — ")}`);
      this.changeEmitter.fire(undefined);
      return;
    }
    try {
      this.roots = await this.load();
      this.setMessage(undefined);
      this.afterLoad(this.roots);
    } catch (error) {
      this.roots = [];
      if (error instanceof MnemoRequestError && error.code === UNAVAILABLE && !store) {
        // Before the first `mnemo/stateChanged`: still connecting, not a failure.
        this.setMessage("Connecting to Mnemo's store…");
        logger.debug(`${this.viewName} view:`, error.message);
      } else {
        this.setMessage(this.describeError(error));
        logger.warn(`${this.viewName} view:`, error instanceof Error ? error.message : error);
      }
    }
    this.parents = new Map();
    const walk = (nodes: TreeNode[], parent: TreeNode | undefined): void => {
      for (const node of nodes) {
        if (parent) {
          this.parents.set(node.id, parent);
        }
        if (node.type === "group") {
          walk(node.children, node);
        }
      }
    };
    walk(this.roots, undefined);
    this.changeEmitter.fire(undefined);
  }

  protected describeError(error: unknown): string {
    if (error instanceof MnemoRequestError) {
      if (error.code === NOT_SUPPORTED) {
        return `${this.viewName} needs a newer Mnemo owner process: ${error.message}`;
      }
      if (error.code === UNAVAILABLE) {
        return `Mnemo's store is unavailable: ${error.message}`;
      }
      return error.message;
    }
    return error instanceof Error ? error.message : String(error);
  }

  private setMessage(message: string | undefined): void {
    if (this.view) {
      this.view.message = message;
    }
  }

  getTreeItem(node: TreeNode): vscode.TreeItem {
    return toTreeItem(node, (n) => this.clickCommand(n));
  }

  getChildren(node?: TreeNode): TreeNode[] {
    if (!node) {
      return this.roots;
    }
    return node.type === "group" ? node.children : [];
  }

  getParent(node: TreeNode): TreeNode | undefined {
    return this.parents.get(node.id);
  }

  /** Finds a loaded node by id (for `reveal`). */
  find(predicate: (node: TreeNode) => boolean): TreeNode | undefined {
    const stack = [...this.roots];
    while (stack.length) {
      const node = stack.shift() as TreeNode;
      if (predicate(node)) {
        return node;
      }
      if (node.type === "group") {
        stack.push(...node.children);
      }
    }
    return undefined;
  }

  dispose(): void {
    this.changeEmitter.dispose();
  }
}
