/**
 * Names shared with package.json and with the language server (docs/protocol.md), grouped as in esbonio:
 * commands, custom requests, notifications, views, context keys.
 */

export const EXTENSION_ID = "mnemo.mnemo";
export const SERVER_ID = "mnemo";
export const SERVER_NAME = "Mnemo";
export const CONFIG_SECTION = "mnemo";

/** VS Code commands contributed in package.json. */
export const Commands = {
  rememberSelection: "mnemo.rememberSelection",
  remember: "mnemo.remember",
  promote: "mnemo.promote",
  deprecate: "mnemo.deprecate",
  forget: "mnemo.forget",
  editMemory: "mnemo.editMemory",
  openMemory: "mnemo.openMemory",
  copyMemory: "mnemo.copyMemory",
  showInjection: "mnemo.showInjection",
  exportSnapshot: "mnemo.exportSnapshot",
  importSnapshot: "mnemo.importSnapshot",
  mergeBranch: "mnemo.mergeBranch",
  runDecay: "mnemo.runDecay",
  compact: "mnemo.compact",
  restart: "mnemo.restart",
  showLogs: "mnemo.showLogs",
  refresh: "mnemo.refresh",
  reviewResolve: "mnemo.review.resolve",
  reviewAccept: "mnemo.review.accept",
  reviewReject: "mnemo.review.reject",
  reviewShowDiff: "mnemo.review.showDiff",
  openSkill: "mnemo.skills.open",
  showCopilotContext: "mnemo.showCopilotContext",
  publishAgentFiles: "mnemo.publishAgentFiles",
} as const;

/** Commands the server executes (`workspace/executeCommand`, arguments `[ {params} ]`). */
export const ServerCommands = {
  rememberSelection: "mnemo.rememberSelection",
  remember: "mnemo.remember",
  anchorMemory: "mnemo.anchorMemory",
  promote: "mnemo.promote",
  deprecate: "mnemo.deprecate",
  forget: "mnemo.forget",
  restore: "mnemo.restore",
  editMemory: "mnemo.editMemory",
  openMemory: "mnemo.openMemory",
  showInjection: "mnemo.showInjection",
  indexDocs: "mnemo.indexDocs",
  snapshotExport: "mnemo.snapshotExport",
  snapshotDiff: "mnemo.snapshotDiff",
  snapshotMerge: "mnemo.snapshotMerge",
  branchMerge: "mnemo.branchMerge",
  branchDelete: "mnemo.branchDelete",
  runDecay: "mnemo.runDecay",
  compact: "mnemo.compact",
  resolveReview: "mnemo.resolveReview",
  reconnect: "mnemo.reconnect",
  publish: "mnemo.publish",
} as const;

/**
 * Server commands that the extension registers itself (same id, richer UI: prompts when called without
 * arguments, shows results). The language client must not register these again.
 */
export const EXTENSION_HANDLED_SERVER_COMMANDS: ReadonlySet<string> = new Set(
  Object.values(ServerCommands).filter((id) => (Object.values(Commands) as string[]).includes(id)),
);

/** Server commands a hover may link to (`command:` links; the client declares them in
 * `capabilities.experimental.mnemoCommandLinks`, and trusts only these in hover Markdown). */
export const HOVER_COMMAND_LINKS: readonly string[] = ["mnemo.editMemory"];

/** Custom requests, client -> server. */
export const Requests = {
  status: "mnemo/status",
  listMemories: "mnemo/listMemories",
  getMemory: "mnemo/getMemory",
  recall: "mnemo/recall",
  activeSkills: "mnemo/activeSkills",
  skills: "mnemo/skills",
  reviewQueue: "mnemo/reviewQueue",
  injectionPreview: "mnemo/injectionPreview",
  stats: "mnemo/stats",
  branchDiff: "mnemo/branchDiff",
  mergedBranches: "mnemo/mergedBranches",
} as const;

/** Notifications. */
export const Notifications = {
  stateChanged: "mnemo/stateChanged",
  memoriesChanged: "mnemo/memoriesChanged",
  didChangeActiveEditor: "mnemo/didChangeActiveEditor",
} as const;

export const Views = {
  container: "mnemo",
  memories: "mnemo.memories",
  skills: "mnemo.skills",
  review: "mnemo.review",
} as const;

/** `when`-clause context keys set by the extension. */
export const ContextKeys = {
  serverState: "mnemo.serverState",
} as const;

/** The URI scheme of read-only documents the extension shows (memory texts for diffs, previews). */
export const DOC_SCHEME = "mnemo";

/** The id of the MCP server definition provider (package.json `contributes.mcpServerDefinitionProviders`). */
export const MCP_PROVIDER_ID = "mnemo.mcp";

/** `data.code` values of a failed request that mean "the owner does not offer this yet". */
export const NOT_SUPPORTED = "not_supported";
export const UNAVAILABLE = "unavailable";
