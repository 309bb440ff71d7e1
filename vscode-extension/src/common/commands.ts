/**
 * The command palette, context-menu and view-title commands: the registration table. Each command lives with its
 * feature group in `src/commands/` (remember, memories, show, sharing, lifecycle, review). Each one works from the
 * palette (it asks for what it needs), from a tree item (it takes the node) and from the server's code actions and
 * code lenses (it takes the server's params object and forwards it), then shows the result and refreshes the views.
 * A failing command is reported once (an error message with "Show Logs") and answers undefined.
 */
import * as vscode from "vscode";

import * as lifecycle from "../commands/lifecycle";
import * as memories from "../commands/memories";
import * as remember from "../commands/remember";
import * as review from "../commands/review";
import type { CommandContext, Views } from "../commands/shared";
import * as sharing from "../commands/sharing";
import * as show from "../commands/show";
import { Commands } from "./constants";
import type { MnemoDocuments } from "./documents";
import { logger } from "./logger";
import type { MnemoServer } from "./server";
import { MnemoRequestError } from "./server";

export type { Views } from "../commands/shared";

export class CommandHandlers implements CommandContext {
  constructor(readonly server: MnemoServer, readonly views: Views, readonly docs: MnemoDocuments) {}

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
      r(Commands.rememberSelection, (arg) => remember.rememberSelection(this, arg)),
      r(Commands.remember, (arg) => remember.remember(this, arg)),
      r(Commands.promote, (arg) => memories.promote(this, arg)),
      r(Commands.deprecate, (arg) => memories.deprecate(this, arg)),
      r(Commands.forget, (arg) => memories.forget(this, arg)),
      r(Commands.editMemory, (arg) => memories.editMemory(this, arg)),
      r(Commands.openMemory, (arg) => show.openMemory(this, arg)),
      r(Commands.copyMemory, (arg) => show.copyMemory(arg)),
      r(Commands.showInjection, (arg) => show.showInjection(this, arg)),
      r(Commands.exportSnapshot, (arg) => sharing.exportSnapshot(this, arg)),
      r(Commands.publishAgentFiles, () => sharing.publishAgentFiles(this)),
      r(Commands.importSnapshot, (arg, strategy) => sharing.importSnapshot(this, arg, strategy)),
      r(Commands.mergeBranch, (arg) => sharing.mergeBranch(this, arg)),
      r(Commands.runDecay, () => lifecycle.runDecay(this)),
      r(Commands.compact, () => lifecycle.compact(this)),
      r(Commands.restart, () => this.server.restart()),
      r(Commands.showLogs, () => {
        logger.show();
        return Promise.resolve();
      }),
      r(Commands.refresh, () => this.refreshAll()),
      r(Commands.reviewResolve, (arg) => review.resolveReview(this, arg)),
      r(Commands.reviewAccept, (arg) => review.resolveReview(this, arg, "first")),
      r(Commands.reviewReject, (arg) => review.resolveReview(this, arg, "negative")),
      r(Commands.reviewShowDiff, (arg) => review.showReviewDiff(this, arg)),
      r(Commands.openSkill, (arg) => show.openSkill(arg)),
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

  async afterWrite(reason: string, ids: string[]): Promise<void> {
    this.server.notifyMemoriesChanged(reason, ids);
    await this.refreshAll();
  }
}
