/**
 * The one output channel ("Mnemo", a LogOutputChannel). The language client writes its trace and the server's
 * `window/logMessage` records to the same channel, so a user has one place to look.
 */
import * as vscode from "vscode";

let channel: vscode.LogOutputChannel | undefined;

export function createLogger(): vscode.LogOutputChannel {
  channel ??= vscode.window.createOutputChannel("Mnemo", { log: true });
  return channel;
}

function describe(args: unknown[]): string {
  return args
    .map((arg) => {
      if (arg instanceof Error) {
        return arg.stack ?? arg.message;
      }
      if (typeof arg === "string") {
        return arg;
      }
      try {
        return JSON.stringify(arg);
      } catch {
        return String(arg);
      }
    })
    .join(" ");
}

export const logger = {
  info(...args: unknown[]): void {
    channel?.info(describe(args));
  },
  warn(...args: unknown[]): void {
    channel?.warn(describe(args));
  },
  error(...args: unknown[]): void {
    channel?.error(describe(args));
  },
  debug(...args: unknown[]): void {
    channel?.debug(describe(args));
  },
  show(): void {
    channel?.show(true);
  },
};
