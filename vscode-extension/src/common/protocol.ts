/**
 * The shapes of docs/protocol.md, as far as the extension reads them. Everything the server may omit is optional:
 * the views must render whatever subset arrives (older servers, owners without an operation).
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

export interface StatusResult extends StateChanged {
  home?: string;
  owner?: { pid?: number; version?: string; index_ready?: boolean; model_loaded?: boolean };
  supported?: Record<string, boolean>;
  lsp?: { pid?: number; version?: string };
}

export interface MemoriesChanged {
  reason: string;
  ids?: string[];
}

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

/** A `Memory` record. */
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

export interface ListMemoriesResult {
  total?: number;
  memories: Memory[];
  branch?: string | null;
  defaultBranch?: string | null;
  project?: ProjectInfo;
}

/** One entry of `mnemo/activeSkills` `activations`. */
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

export interface ActiveSkillsResult {
  file?: string | null;
  activations: Activation[];
  total_tokens?: number;
  considered?: number;
  /** The activation threshold (a probability). */
  threshold?: number;
  /** The nearest misses: probability (`score`) and the threshold they missed, or why else they are not active. */
  dropped?: { skill_id?: string; name?: string; score?: number; threshold?: number; why?: string; source_path?: string }[];
  /** Skill files that read like a prompt injection: held until accepted in Review. */
  held?: { skill_id?: string; name?: string; source_path?: string; why?: string }[];
  error?: string;
}

/** A skill as `mnemo/skills` lists it. */
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

export interface SkillProblem {
  path?: string;
  severity?: string;
  /** The owner sends `reason`; docs/protocol.md says `message`: read both. */
  reason?: string;
  message?: string;
  source_format?: string;
  line?: number;
}

export interface SkillsResult {
  skills: Skill[];
  check?: { files_seen?: number; loaded?: number; problems?: SkillProblem[] };
}

/**
 * A `mnemo/reviewQueue` item (the owner's `review_list`): `item` is the memory the entry is about (for a conflict,
 * the newcomer), `other` the one it collides with (for a conflict, the memory already stored).
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

export interface ReviewQueueResult {
  items: ReviewItem[];
  total?: number;
}

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

/** What a remember command answers. */
export interface WriteResult {
  status?: string;
  memory?: Memory;
  message?: string;
}

/** `data` of a failed request (JSON-RPC error -32803). */
export interface ErrorData {
  type?: string;
  code?: string;
  message?: string;
  hint?: string;
  details?: unknown;
}

/** `mnemo/mergedBranches`: branches git shows merged into the default branch, memories not merged yet. */
export interface MergedBranchesResult {
  default_branch?: string | null;
  branches: { branch: string; head?: string; memories?: number }[];
  note?: string;
}

/** Snapshot import strategies (SPEC §5). */
export const MERGE_STRATEGIES = ["newer_wins", "local_wins", "remote_wins", "keep_both"] as const;
export type MergeStrategy = (typeof MERGE_STRATEGIES)[number];
