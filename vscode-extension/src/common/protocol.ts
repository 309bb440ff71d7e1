/**
 * The shapes of docs/protocol.md, as far as the extension reads them. Everything the server may omit is optional:
 * the views must render whatever subset arrives (older servers, owners without an operation).
 *
 * Most results are the owner's, passed through by the language server. Tags tie them to the one declaration of the
 * service API (`server/mnemo/api/`), and tests/unit/test_protocol_ts.py checks them:
 * - `@owner T` (or `@owner T|U`): every field here is a key of the TypedDict `T` (or of one of them) of
 *   `mnemo/core/api_types/records.py` or `results.py` (the diff shapes in format.ts are tagged too);
 * - `@call <request or command> <service method>`: on a `...Params` interface, the params the extension sends; each
 *   field, camelCase -> snake_case (or renamed `tsName=py_name`), is a parameter of that service method;
 * - `@lsp a b`: fields the language server itself adds or reads (not the owner's).
 * The extension's calls (`server.request` / `server.command` with an object literal) may only send fields of the
 * matching `...Params` interface.
 */

export type ServerState = "starting" | "ready" | "unavailable";

export interface ProjectInfo {
  id?: string;
  name?: string;
  root?: string;
}

/** `mnemo/stateChanged` and the common part of `mnemo/status`. */
export interface StateChanged {
  state: ServerState;
  reason?: string | null;
  hint?: string | null;
  project?: ProjectInfo | null;
  branch?: string | null;
  defaultBranch?: string | null;
  activeFile?: string | null;
  activeSkillCount?: number;
  activeSkills?: string[];
}

/**
 * The owner's `health`, as `mnemo/status` reports it.
 * @owner Health
 */
export interface OwnerInfo {
  pid?: number;
  version?: string;
  index_ready?: boolean;
  model_loaded?: boolean;
}

export interface StatusResult extends StateChanged {
  home?: string;
  owner?: OwnerInfo;
  supported?: Record<string, boolean>;
  lsp?: { pid?: number; version?: string };
}

export interface MemoriesChanged {
  reason: string;
  ids?: string[];
}

/** @owner Anchor */
export interface Anchor {
  path?: string;
  symbol?: string;
  kind?: string;
  start_line?: number;
  end_line?: number;
  /** sha256 of the symbol's source when anchored; a mismatch on save files a `stale_anchor` review item. */
  hash?: string;
}

export interface Provenance {
  promoted_from?: { scope?: string; project_id?: string; project_name?: string; id?: string; source_path?: string;
                    [key: string]: unknown };
  merged_from?: unknown;
  imported_from?: unknown;
  [key: string]: unknown;
}

/**
 * A `Memory` record.
 * @owner Memory
 */
export interface Memory {
  id: string;
  text: string;
  type: string;
  kind: string;
  scope: string;
  project_id?: string;
  project_name?: string;
  branch?: string | null;
  importance?: number;
  confirmations?: number;
  created_at?: number;
  updated_at?: number;
  last_accessed?: number;
  access_count?: number;
  source?: string;
  provenance?: Provenance;
  anchors?: Anchor[];
  superseded_by?: string | null;
  deprecated?: boolean;
  deprecated_reason?: string | null;
  tier?: string;
  tags?: string[];
  trust?: string;
  status?: string;
  author?: string;
  flags?: string[];
}

/**
 * `mnemo/listMemories`: the owner's `list_memories` and where the list was taken.
 * @owner MemoryList
 * @lsp branch defaultBranch project
 */
export interface ListMemoriesResult {
  total?: number;
  memories: Memory[];
  branch?: string | null;
  defaultBranch?: string | null;
  project?: ProjectInfo;
}

/**
 * One entry of `mnemo/activeSkills` `activations`.
 * @owner Activation
 */
export interface Activation {
  skill_id?: string;
  name: string;
  description?: string;
  source_path?: string;
  source_format?: string;
  scope?: string;
  score: number;
  activated_by?: string[];
  signals?: Record<string, number>;
  matched?: Record<string, unknown>;
  token_cost?: number;
  always?: boolean;
  reason?: string;
}

/**
 * A skill that is not active, and why: a near miss (`score` below `threshold`), or a file held for review.
 * @owner SkillMiss
 */
export interface SkillMiss {
  skill_id?: string;
  name?: string;
  score?: number;
  threshold?: number;
  why?: string;
  source_path?: string;
}

/**
 * `mnemo/activeSkills`: the owner's `activate_skills` for the file (`error`: the skills engine failed).
 * @owner ActivationResult
 * @lsp file error
 */
export interface ActiveSkillsResult {
  file?: string | null;
  activations: Activation[];
  total_tokens?: number;
  considered?: number;
  /** The activation threshold (a probability). */
  threshold?: number;
  /** The nearest misses: probability (`score`) and the threshold they missed, or why else they are not active. */
  dropped?: SkillMiss[];
  /** Skill files that read like a prompt injection: held until accepted in Review. */
  held?: SkillMiss[];
  error?: string;
}

/**
 * A skill as `mnemo/skills` lists it.
 * @owner Skill
 */
export interface Skill {
  id?: string;
  name: string;
  description?: string;
  source_path?: string;
  source_format?: string;
  scope?: string;
  globs?: string[];
  keywords?: string[];
  always_apply?: boolean;
}

/** @owner SkillProblem */
export interface SkillProblem {
  path?: string;
  severity?: string;
  reason?: string;
  source_format?: string;
  line?: number;
}

/** @owner SkillsCheck */
export interface SkillsCheck {
  files_seen?: number;
  loaded?: number;
  problems?: SkillProblem[];
}

/**
 * `mnemo/skills`: the owner's `skills_list`, with its `skills_check` under `check` when asked.
 * @owner SkillList
 * @lsp check
 */
export interface SkillsResult {
  skills: Skill[];
  check?: SkillsCheck;
}

/**
 * A `mnemo/reviewQueue` item (the owner's `review_list`): `item` is the memory the entry is about (for a conflict,
 * the newcomer), `other` the one it collides with (for a conflict, the memory already stored).
 * @owner ReviewItem
 */
export interface ReviewItem {
  id: number | string;
  /** conflict | override | pending | stale_anchor | branch_merge | snapshot_merge | secret | ... */
  kind: string;
  summary?: string;
  created_at?: number;
  item_id?: string | null;
  other_id?: string | null;
  item?: Memory | null;
  other?: Memory | null;
  payload?: Record<string, unknown>;
  /** The answers this item accepts (`supersede`, `keep_both`, `keep_existing`, `accept`, `reject`, ...). */
  resolutions?: string[];
  /** One line per resolution, for the picker. */
  help?: string;
}

/** @owner ReviewList */
export interface ReviewQueueResult {
  items: ReviewItem[];
  total?: number;
}

/**
 * A recall hit.
 * @owner Card
 */
export interface Card {
  item_id: string;
  scope?: string;
  source_kind?: string;
  title?: string;
  compressed_summary?: string;
  score?: number;
  confidence?: number;
  confidence_state?: string;
  source_path?: string | null;
  type?: string;
  branch?: string | null;
}

export interface InjectionPreview {
  file?: string | null;
  query?: string;
  skills?: Activation[];
  memories?: Card[];
  /** Recalled but not injected: untrusted or flagged (shown with a warning, never injected unasked). */
  withheld?: Card[];
  skillTokens?: number;
  memoryTokens?: number;
  totalTokens?: number;
  markdown?: string;
}

/**
 * What a remember, promote or deprecate command answers.
 * @owner RememberResult|MemoryChange
 */
export interface WriteResult {
  status?: string;
  memory?: Memory;
  message?: string;
}

/**
 * `mnemo.editMemory`: the edited memory; status updated | unchanged | conflict | pending | kept_existing.
 * @owner UpdateResult
 */
export interface UpdateResult {
  status?: string;
  memory?: Memory;
  message?: string;
  version?: number;
}

/**
 * `mnemo.forget`: `restorable` false when the forget retention is 0 days (no Undo).
 * @owner Forgotten
 */
export interface ForgetResult {
  status?: string;
  id?: string;
  restorable?: boolean;
}

/** `mnemo/getMemory` (the language server's wrapper of the owner's memory). */
export interface GetMemoryResult {
  memory?: Memory;
  hydrated?: unknown;
}

/** `data` of a failed request (JSON-RPC error -32803). */
export interface ErrorData {
  type?: string;
  code?: string;
  message?: string;
  hint?: string;
  details?: unknown;
}

/** @owner MergedBranch */
export interface MergedBranch {
  branch: string;
  head?: string;
  memories?: number;
}

/**
 * `mnemo/mergedBranches`: branches git shows merged into the default branch, memories not merged yet.
 * @owner MergedBranches
 */
export interface MergedBranchesResult {
  default_branch?: string | null;
  branches: MergedBranch[];
  note?: string;
}

/** Snapshot import strategies (SPEC §5). */
export const MERGE_STRATEGIES = ["newer_wins", "local_wins", "remote_wins", "keep_both"] as const;
export type MergeStrategy = (typeof MERGE_STRATEGIES)[number];

// -- params: what the extension sends --------------------------------------------------------------------------------

/**
 * @call mnemo/listMemories list_memories
 * @lsp uri
 */
export interface ListMemoriesParams {
  scope?: "hybrid" | "project" | "global" | "team";
  branch?: string | null;
  allBranches?: boolean;
  type?: string | null;
  kind?: string | null;
  status?: string | null;
  includeDeprecated?: boolean;
  includeCold?: boolean;
  limit?: number;
  offset?: number;
  /** filters (docs/protocol.md): every tag, last written since/until (epoch seconds, 2026-11-30, 7d), ... */
  tags?: string[];
  since?: string | number;
  until?: string | number;
  author?: string;
  source?: string;
  search?: string;
  uri?: string;
}

/**
 * `uri` (default: the active document) is the file whose skills are asked for.
 * @call mnemo/activeSkills activate_skills uri=file
 */
export interface ActiveSkillsParams {
  uri?: string;
  message?: string;
}

/**
 * `check`: also the owner's `skills_check`.
 * @call mnemo/skills skills_list
 * @lsp uri check
 */
export interface SkillsParams {
  uri?: string;
  check?: boolean;
}

/**
 * @call mnemo/reviewQueue review_list
 * @lsp uri limit
 */
export interface ReviewQueueParams {
  uri?: string;
  kind?: string;
  includeResolved?: boolean;
  limit?: number;
}

/**
 * Memories are recalled for `message`, else the symbol at `position`, else the file; skills for the file.
 * @call mnemo/injectionPreview activate_skills uri=file
 * @lsp position
 */
export interface InjectionPreviewParams {
  uri?: string;
  message?: string;
  position?: { line: number; character: number };
}

/**
 * @call mnemo/mergedBranches merged_branches
 * @lsp uri
 */
export interface MergedBranchesParams {
  queue?: boolean;
  uri?: string;
}

/**
 * `into`: the target branch (default: the checked-out one).
 * @call mnemo/branchDiff branch_diff branch=source
 * @lsp uri into
 */
export interface BranchDiffParams {
  branch: string;
  into?: string;
  uri?: string;
}

export interface Position {
  line: number;
  character: number;
}

/**
 * The innermost function or class enclosing `range` becomes the anchor.
 * @call mnemo.rememberSelection remember
 * @lsp uri range
 */
export interface RememberSelectionParams {
  uri: string;
  range: { start: Position; end: Position };
  text?: string;
  type?: string;
  kind?: string;
  tags?: string[];
  importance?: number;
}

/**
 * @call mnemo.remember remember
 * @lsp uri
 */
export interface RememberParams {
  text: string;
  uri?: string;
  type?: string;
  kind?: string;
  tags?: string[];
  importance?: number;
}

/**
 * @call mnemo.promote promote id=memory_id
 * @lsp uri
 */
export interface PromoteParams {
  id: string;
  to?: "global" | "team";
  uri?: string;
}

/**
 * @call mnemo.deprecate deprecate id=memory_id
 * @lsp uri
 */
export interface DeprecateParams {
  id: string;
  reason?: string;
  uri?: string;
}

/**
 * @call mnemo.forget forget id=memory_id
 * @lsp uri
 */
export interface ForgetParams {
  id: string;
  reason?: string;
  uri?: string;
}

/**
 * @call mnemo.editMemory update id=memory_id
 * @lsp uri
 */
export interface EditMemoryParams {
  id: string;
  text?: string;
  tags?: string[];
  type?: string;
  kind?: string;
  importance?: number;
  reason?: string;
  uri?: string;
}

/**
 * @call mnemo.restore restore id=memory_id
 * @lsp uri
 */
export interface RestoreParams {
  id: string;
  uri?: string;
}

/**
 * @call mnemo/getMemory get_memory id=memory_id
 * @lsp uri hydrate
 */
export interface GetMemoryParams {
  id: string;
  hydrate?: boolean;
  uri?: string;
}

/**
 * `ids` (several) or `id`; `symbol`: what the lens was about.
 * @call mnemo.openMemory get_memory id=memory_id
 * @lsp ids uri symbol
 */
export interface OpenMemoryParams {
  id?: string;
  ids?: string[];
  uri?: string;
  symbol?: string;
}

/**
 * @call mnemo.snapshotExport snapshot_export
 * @lsp uri
 */
export interface SnapshotExportParams {
  path: string;
  scopes?: string[];
  branches?: string[];
  uri?: string;
}

/**
 * @call mnemo.snapshotDiff snapshot_diff
 * @lsp uri
 */
export interface SnapshotDiffParams {
  path: string;
  strategy?: MergeStrategy;
  uri?: string;
}

/**
 * @call mnemo.snapshotMerge snapshot_merge
 * @lsp uri
 */
export interface SnapshotMergeParams {
  path: string;
  strategy?: MergeStrategy;
  uri?: string;
}

/**
 * @call mnemo.branchMerge branch_merge branch=source
 * @lsp uri into
 */
export interface BranchMergeParams {
  branch: string;
  into?: string;
  uri?: string;
}

/**
 * @call mnemo.runDecay decay
 * @lsp uri
 */
export interface RunDecayParams {
  now?: number | string;
  dryRun?: boolean;
  force?: boolean;
  uri?: string;
}

/**
 * @call mnemo.compact compact
 * @lsp uri
 */
export interface CompactParams {
  uri?: string;
}

/**
 * @call mnemo.publish publish
 * @lsp uri
 */
export interface PublishParams {
  targets?: string[];
  dryRun?: boolean;
  budget?: number;
  sync?: boolean;
  uri?: string;
}

/**
 * @call mnemo.resolveReview review_resolve id=review_id
 * @lsp uri
 */
export interface ResolveReviewParams {
  id: number | string;
  resolution: string;
  uri?: string;
}
