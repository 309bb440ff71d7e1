/**
 * Read-only documents under the `mnemo:` scheme: memory texts (the two sides of a conflict diff), previews
 * (what would be injected, snapshot imports, branch merges). Nothing is written to disk.
 */
import * as vscode from "vscode";

import { DOC_SCHEME } from "./constants";

export class MnemoDocuments implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly contents = new Map<string, string>();
  private readonly changeEmitter = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changeEmitter.event;
  private readonly registration: vscode.Disposable;

  constructor() {
    this.registration = vscode.workspace.registerTextDocumentContentProvider(DOC_SCHEME, this);
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.contents.get(uri.toString()) ?? "";
  }

  /** Stores `content` under `mnemo:/<path>` and returns its URI (updating an open document in place). */
  put(path: string, content: string): vscode.Uri {
    const uri = vscode.Uri.from({ scheme: DOC_SCHEME, path: path.startsWith("/") ? path : `/${path}` });
    const key = uri.toString();
    const changed = this.contents.has(key) && this.contents.get(key) !== content;
    this.contents.set(key, content);
    if (changed) {
      this.changeEmitter.fire(uri);
    }
    return uri;
  }

  /** Opens Markdown read-only in the second editor group (one reused group, not a new one per preview). */
  async showMarkdown(path: string, markdown: string, beside = true): Promise<vscode.TextEditor> {
    const uri = this.put(path, markdown);
    const doc = await vscode.workspace.openTextDocument(uri);
    const md = await vscode.languages.setTextDocumentLanguage(doc, "markdown");
    return vscode.window.showTextDocument(md, {
      preview: true, viewColumn: beside ? vscode.ViewColumn.Two : vscode.ViewColumn.Active,
    });
  }

  /** Opens a unified diff (text) read-only, highlighted as a diff, in the second editor group. */
  async showUnifiedDiff(path: string, text: string): Promise<vscode.TextEditor> {
    const uri = this.put(path, text);
    const doc = await vscode.workspace.openTextDocument(uri);
    const diff = await vscode.languages.setTextDocumentLanguage(doc, "diff");
    return vscode.window.showTextDocument(diff, { preview: true, viewColumn: vscode.ViewColumn.Two });
  }

  /** Opens a side-by-side diff of two texts. */
  async showDiff(left: { path: string; text: string }, right: { path: string; text: string },
                 title: string): Promise<void> {
    const l = this.put(left.path, left.text);
    const r = this.put(right.path, right.text);
    await vscode.commands.executeCommand("vscode.diff", l, r, title, { preview: true });
  }

  dispose(): void {
    this.registration.dispose();
    this.changeEmitter.dispose();
  }
}
