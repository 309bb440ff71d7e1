"""A planted corpus for the secret scanner: realistic secrets among harmless developer notes.

Secrets are synthesized at run time in the formats real providers issue (nothing real is stored in the repo, and
push-protection scanners are not tripped by this file): cloud keys, VCS and chat tokens, payment keys, private key
blocks, JWTs, credentials in URLs, generic `api_key=...` assignments, passwords in prose. The harmless notes are
what developers actually write down: git SHAs, sha256/sha1/md5 hex, UUIDs, base64 data (images, SRI hashes, SSH
public keys, encoded JSON and config), Mnemo's own ids and hashes, Docker digests, placeholders, long identifiers.

`corpus(seed)` returns (secrets, harmless): lists of (category, note text, secret value or None).
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import uuid

UPPER = string.ascii_uppercase
LOWER = string.ascii_lowercase
DIGITS = string.digits
ALNUM = UPPER + LOWER + DIGITS
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"
HEX = "0123456789abcdef"


def _s(r: random.Random, alphabet: str, n: int) -> str:
    return "".join(r.choice(alphabet) for _ in range(n))


def _mixed(r: random.Random, n: int, alphabet: str = ALNUM) -> str:
    """A random token that contains upper case, lower case and digits (as real keys do)."""
    while True:
        t = _s(r, alphabet, n)
        if any(c in UPPER for c in t) and any(c in LOWER for c in t) and any(c in DIGITS for c in t):
            return t


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _jwt(r: random.Random) -> str:
    head = _b64url(json.dumps({"alg": r.choice(["HS256", "RS256"]), "typ": "JWT"}).encode())
    body = _b64url(json.dumps({"sub": str(r.randrange(10**6)), "name": r.choice(["ana", "bo", "cy"]),
                               "iat": 1700000000 + r.randrange(10**7), "scope": "read write"}).encode())
    sig = _b64url(r.randbytes(32))
    return f"{head}.{body}.{sig}"


def _pem(r: random.Random, kind: str) -> str:
    body = base64.b64encode(r.randbytes(r.choice([300, 600, 1190]))).decode()
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    return f"-----BEGIN {kind}-----\n" + "\n".join(lines) + f"\n-----END {kind}-----"


def _password(r: random.Random) -> str:
    words = ["correct", "horse", "battery", "staple", "Tr0ub4dor", "summer", "Winter", "dragon", "Falcon"]
    style = r.randrange(3)
    if style == 0:
        return r.choice(words) + str(r.randrange(10, 9999)) + r.choice("!#$%&*")
    if style == 1:
        return _mixed(r, r.randrange(12, 20), ALNUM + "!@#%^&*")
    return r.choice(words).capitalize() + r.choice("._-") + r.choice(words) + str(r.randrange(100))


def _secret_generators():
    """(category, generator(r) -> (note text, secret value)) for every planted format."""
    def aws_id(r):
        v = "AKIA" + _s(r, UPPER + "234567", 16)
        return r.choice([f"CI deploys with access key {v}", f"aws_access_key_id = {v}",
                         f"the backup bucket uses {v} (rotate yearly)"]), v

    def aws_secret(r):
        v = _mixed(r, 40, B64)
        return r.choice([f"aws_secret_access_key = {v}", f"AWS_SECRET_ACCESS_KEY={v}",
                         f"secret access key for the backup user: {v}"]), v

    def github(r):
        prefix = r.choice(["ghp_", "gho_", "ghu_", "ghs_", "ghr_"])
        v = prefix + _mixed(r, 36)
        return r.choice([f"use token {v} to push to the release repo", f"GITHUB_TOKEN={v}",
                         f"the bot authenticates with {v}"]), v

    def github_pat(r):
        v = "github_pat_" + _mixed(r, 22) + "_" + _mixed(r, 59)
        return f"fine-grained PAT for the docs mirror: {v}", v

    def gitlab(r):
        v = "glpat-" + _mixed(r, 20, ALNUM + "-_")
        return r.choice([f"gitlab runner registered with {v}", f"GITLAB_TOKEN: {v}"]), v

    def slack(r):
        kind = r.choice(["xoxb", "xoxp", "xoxa"])
        v = f"{kind}-{r.randrange(10**11, 10**12)}-{r.randrange(10**11, 10**12)}-{_mixed(r, 24)}"
        return r.choice([f"slack bot token {v}", f"post alerts with {v} to #ops"]), v

    def slack_webhook(r):
        v = f"https://hooks.slack.com/services/T{_s(r, UPPER + DIGITS, 8)}/B{_s(r, UPPER + DIGITS, 10)}/{_mixed(r, 24)}"
        return f"alerts go to the webhook {v}", v

    def stripe(r):
        v = r.choice(["sk_live_", "rk_live_", "sk_test_"]) + _mixed(r, 24)
        return r.choice([f"stripe key {v} is only on the billing host", f"STRIPE_SECRET_KEY={v}",
                         f"charge with {v} in the smoke test"]), v

    def private_key(r):
        v = _pem(r, r.choice(["RSA PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY", "PRIVATE KEY",
                              "PGP PRIVATE KEY BLOCK", "DSA PRIVATE KEY", "ENCRYPTED PRIVATE KEY"]))
        return f"deploy key for the bastion:\n{v}", v.split("\n")[1]

    def jwt(r):
        v = _jwt(r)
        return r.choice([f"a session token that works on staging: {v}", f"Authorization: Bearer {v}",
                         f"test with jwt {v}"]), v

    def url_password(r):
        user = r.choice(["admin", "app", "deploy", "postgres", "svc_billing"])
        pw = _password(r).replace("@", "x").replace("/", "x").replace(":", "x").replace("#", "x")
        host = r.choice(["db.internal", "10.0.3.12", "cache.prod.acme.io", "mq.acme.local"])
        scheme = r.choice(["postgres", "postgresql", "mysql", "mongodb", "redis", "amqp", "https"])
        v = f"{scheme}://{user}:{pw}@{host}:{r.choice([5432, 3306, 27017, 6379, 5672, 443])}/app"
        return r.choice([f"connect with {v}", f"DATABASE_URL={v}", f"the legacy job still uses {v}"]), pw

    def generic_assign(r):
        name = r.choice(["api_key", "API_KEY", "apiKey", "secret", "client_secret", "AUTH_TOKEN", "access_token",
                         "SENTRY_AUTH_TOKEN", "DATADOG_API_KEY", "x-api-key", "SECRET_KEY"])
        v = _mixed(r, r.randrange(20, 48), ALNUM + r.choice(["", "_-"]))
        fmt = r.choice([f"{name}={v}", f"{name} = \"{v}\"", f"{name}: {v}", f'"{name}": "{v}"',
                        f"export {name.upper().replace('-', '_')}='{v}'"])
        return f"config for the worker: {fmt}", v

    def openai(r):
        v = r.choice(["sk-proj-", "sk-"]) + _mixed(r, 48, ALNUM + "_-")
        return r.choice([f"OPENAI_API_KEY={v}", f"the eval harness uses {v}"]), v

    def anthropic(r):
        v = "sk-ant-api03-" + _mixed(r, 93, ALNUM + "_-") + "AA"
        return f"claude key for the batch job: {v}", v

    def google(r):
        v = "AIza" + _mixed(r, 35, ALNUM + "_-")
        return r.choice([f"maps key {v}", f"GOOGLE_API_KEY={v}"]), v

    def huggingface(r):
        v = "hf_" + _mixed(r, 34)
        return f"model download token {v}", v

    def sendgrid(r):
        v = "SG." + _mixed(r, 22, ALNUM + "_-") + "." + _mixed(r, 43, ALNUM + "_-")
        return f"mail is sent with {v}", v

    def npm(r):
        v = "npm_" + _mixed(r, 36)
        return r.choice([f"//registry.npmjs.org/:_authToken={v}", f"publish with npm token {v}"]), v

    def pypi(r):
        v = "pypi-AgEIcHlwaS5vcmc" + _mixed(r, 60, ALNUM + "_-")
        return f"twine upload uses {v}", v

    def azure(r):
        key = base64.b64encode(r.randbytes(64)).decode()
        v = f"DefaultEndpointsProtocol=https;AccountName=acmelogs;AccountKey={key};EndpointSuffix=core.windows.net"
        return f"log archive connection string: {v}", key

    def twilio(r):
        v = "".join(r.choice(HEX) for _ in range(32))
        return r.choice([f"TWILIO_AUTH_TOKEN={v}", f"twilio auth token: {v}"]), v

    def mailgun(r):
        v = "key-" + "".join(r.choice(HEX) for _ in range(32))
        return f"mailgun api key {v}", v

    def shopify(r):
        v = r.choice(["shpat_", "shpss_", "shpca_"]) + "".join(r.choice(HEX) for _ in range(32))
        return f"shop admin token {v}", v

    def digitalocean(r):
        v = "dop_v1_" + "".join(r.choice(HEX) for _ in range(64))
        return f"terraform uses {v}", v

    def vault(r):
        v = "hvs." + _mixed(r, 24, ALNUM + "_-")
        return f"vault root token (dev only): {v}", v

    def discord(r):
        v = _mixed(r, 24, ALNUM) + "." + _mixed(r, 6, ALNUM) + "." + _mixed(r, 27, ALNUM + "_-")
        return f"discord bot token {v}", v

    def telegram(r):
        v = f"{r.randrange(10**8, 10**10)}:AA{_mixed(r, 33, ALNUM + '_-')}"
        return f"telegram bot token {v}", v

    def password_prose(r):
        v = _password(r)
        return r.choice([f"the staging db password is {v}", f"password: {v}", f"PGPASSWORD={v}",
                         f"root pwd = {v}", f"wifi passphrase for the lab: {v}", f"admin password {v} (change it)"]), v

    def bearer(r):
        v = _mixed(r, r.randrange(32, 64), ALNUM + "-._~")
        return f"curl -H 'Authorization: Bearer {v}' https://api.acme.io/v1/orders", v

    def basic_auth(r):
        creds = f"{r.choice(['admin', 'ci', 'grafana'])}:{_password(r)}"
        v = base64.b64encode(creds.encode()).decode()
        return f"the proxy wants Authorization: Basic {v}", v

    def random_b64_key(r):
        v = base64.b64encode(r.randbytes(32)).decode()
        return r.choice([f"FERNET_KEY={v}", f"encryption key for backups: {v}", f"SECRET_KEY_BASE={v}"]), v

    return [
        ("aws_access_key_id", aws_id), ("aws_secret_access_key", aws_secret), ("github_token", github),
        ("github_fine_grained_pat", github_pat), ("gitlab_token", gitlab), ("slack_token", slack),
        ("slack_webhook", slack_webhook), ("stripe_key", stripe), ("private_key_block", private_key),
        ("jwt", jwt), ("password_in_url", url_password), ("generic_api_key", generic_assign),
        ("openai_key", openai), ("anthropic_key", anthropic), ("google_api_key", google),
        ("huggingface_token", huggingface), ("sendgrid_key", sendgrid), ("npm_token", npm), ("pypi_token", pypi),
        ("azure_storage_key", azure), ("twilio_auth_token", twilio), ("mailgun_key", mailgun),
        ("shopify_token", shopify), ("digitalocean_token", digitalocean), ("vault_token", vault),
        ("discord_bot_token", discord), ("telegram_bot_token", telegram), ("password_in_prose", password_prose),
        ("bearer_token", bearer), ("basic_auth_header", basic_auth), ("base64_key_assignment", random_b64_key),
    ]


PROSE = [
    "payments API requires idempotency keys on every POST",
    "the CI runs on two shared cores; keep test runs targeted",
    "password reset emails are sent by the auth service, not the API",
    "the token bucket rate limiter allows 50 requests per second per tenant",
    "never commit secrets: the API key goes in the X-Api-Key header, read from the vault at start-up",
    "we rotate keys every 90 days; the rotation runbook is docs/ops/rotate.md",
    "use structlog for logging in services; never log request bodies",
    "front-end state lives in a Redux store; selectors are memoized with reselect",
    "the auth middleware rejects tokens older than 15 minutes",
    "Secrets Manager holds the database password; the app reads it via IAM at boot",
    "set token = os.environ['GITHUB_TOKEN'] in CI, never a literal",
    "token: ${{ secrets.GITHUB_TOKEN }} in the release workflow",
    "API_KEY=<your key here> in .env.example; the real one comes from 1Password",
    "password: ${DB_PASSWORD} is substituted by docker compose",
    "export STRIPE_SECRET_KEY=$(vault read -field=key secret/stripe) before running the smoke test",
    "the secret sauce of the ranking is the recency boost, see ranking.py",
    "bearer auth is handled by the gateway; services only see the X-User-Id header",
    "AbstractSingletonProxyFactoryBean is a joke name; ours is PaymentsClientFactory",
    "server.mnemo.core.engine.Engine.remember is the single entry point for writes",
    "https://docs.python.org/3/library/sqlite3.html#sqlite3.Connection.backup explains the online backup API",
    "timeout=30s; retries=3; backoff=exponential; jitter=full",
    "the pod payments-api-7d9f8b6c5-x2kqz crashed because of an OOM at 512Mi",
    "Stripe request req_1a2B3c4D5e6F7g8H and customer cus_J1a2B3c4D5e6F7 show the double charge",
    "publishable key pk_live_ goes to the browser; the secret key stays on the server",
    "the feature flag new-checkout-flow is on for 10% of tenants",
    "use `git log --format=%H -n 1` to get the full commit id in scripts",
    "the JWT library validates exp, nbf and aud; we pin PyJWT 2.8",
    "our ssh config uses IdentitiesOnly yes so the agent does not offer every key",
    "CORS allows https://app.acme.io and http://localhost:5173 only",
    "the webhook signature is an HMAC-SHA256 of the raw body with the endpoint secret",
    "PGP public keys of the release team are in KEYS.txt at the repo root",
    "max_connections=200 on the primary; pgbouncer pools 20 per service",
    "ignore the flaky test_retry_after on CI; tracked in issue #1234",
    "tokens are stored hashed (argon2id) so a database leak does not expose sessions",
    "the OAuth client id for the CLI is public; the device flow needs no secret",
    "for local dev the password is whatever you set in docker-compose.override.yml",
    "auth=none is only allowed on 127.0.0.1; the team server needs a proxy with a token",
    "GetUserAccountSettingsByOrganizationIdentifierAsync is slow; cache it per request",
    "ENV=production LOG_LEVEL=info WORKERS=4 are the defaults in the Helm chart",
    "keys in the cache are tenant:{id}:orders:{page}; TTL 300 s",
]


def _harmless_generators():
    def git_sha(r):
        sha = "".join(r.choice(HEX) for _ in range(40))
        return r.choice([f"the commit {sha} fixed the flaky retry test", f"revert {sha[:12]} if the deploy fails",
                         f"bisect points at {sha}; it changed the pool size", f"cherry-pick {sha[:7]} onto release/2.3"])

    def sha256_hex(r):
        h = hashlib.sha256(r.randbytes(16)).hexdigest()
        return r.choice([f"release tarball sha256 {h}", f"sha256sum of the model file is {h}",
                         f"checksum: {h} (verify before unpacking)"])

    def sha1_md5(r):
        h = hashlib.sha1(r.randbytes(8)).hexdigest() if r.random() < .5 else hashlib.md5(r.randbytes(8)).hexdigest()
        return r.choice([f"etag {h} means the CDN has the new bundle", f"the fixture file hash is {h}"])

    def uuid_note(r):
        u = str(uuid.UUID(int=r.getrandbits(128), version=4))
        return r.choice([f"request id {u} in the logs shows the timeout", f"tenant {u} is the load-test tenant",
                         f"trace {u} spans three services", f"the migration id is {u}"])

    def docker_digest(r):
        h = hashlib.sha256(r.randbytes(16)).hexdigest()
        return f"pin the base image: python:3.11-slim@sha256:{h}"

    def b64_json(r):
        blob = base64.b64encode(json.dumps({"tenant": r.randrange(1000), "plan": r.choice(["pro", "team"]),
                                            "features": ["export", "sso"]}).encode()).decode()
        return r.choice([f"the cursor param is base64 JSON, e.g. {blob}", f"decoded state cookie looks like {blob}"])

    def b64_text(r):
        text = r.choice(["apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: payments-config\n",
                         "log_level = info\nworkers = 4\nregion = eu-west-1\n",
                         "Hello from the payments team. This is an ordinary message body used in tests."])
        blob = base64.b64encode(text.encode()).decode()
        return f"the fixture payload (base64) is {blob}"

    def b64_image(r):
        raw = b"\x89PNG\r\n\x1a\n" + r.randbytes(r.choice([40, 60, 90]))
        blob = base64.b64encode(raw).decode()
        return f"the 1px tracking pixel is data:image/png;base64,{blob}"

    def sri(r):
        algo = r.choice(["sha384", "sha512", "sha256"])
        n = {"sha256": 32, "sha384": 48, "sha512": 64}[algo]
        blob = base64.b64encode(r.randbytes(n)).decode()
        return r.choice([f'<script src="/vendor.js" integrity="{algo}-{blob}" crossorigin="anonymous">',
                         f'package-lock integrity "{algo}-{blob}" changed after the upgrade'])

    def ssh_pub(r):
        if r.random() < 0.5:
            blob = "AAAAC3NzaC1lZDI1NTE5AAAAI" + base64.b64encode(r.randbytes(32)).decode().rstrip("=")
            return f"add the CI public key: ssh-ed25519 {blob} ci@acme"
        blob = "AAAAB3NzaC1yc2EAAAADAQABAAABAQ" + base64.b64encode(r.randbytes(120)).decode().rstrip("=")
        return f"authorized_keys has ssh-rsa {blob} deploy@bastion"

    def mnemo_ids(r):
        mem = "mem-" + "".join(r.choice(HEX) for _ in range(20))
        blk = "blk-" + "".join(r.choice(HEX) for _ in range(20))
        ch = "".join(r.choice(HEX) for _ in range(32))
        pid = "git-" + "".join(r.choice(HEX) for _ in range(16))
        return r.choice([f"{mem} supersedes the old retry note", f"see block {blk} in docs/architecture.md",
                         f"content hash {ch} matched a tombstone", f"project {pid} is the payments repo",
                         f"team-{mem} was promoted by ana", f"review the conflict between {mem} and {blk}"])

    def public_key_block(r):
        body = base64.b64encode(r.randbytes(270)).decode()
        lines = "\n".join(body[i:i + 64] for i in range(0, len(body), 64))
        return f"the webhook verification key:\n-----BEGIN PUBLIC KEY-----\n{lines}\n-----END PUBLIC KEY-----"

    def semver_paths(r):
        return r.choice([f"bump chromadb to 1.5.{r.randrange(20)} and tree-sitter to 0.2{r.randrange(10)}.1",
                         f"the flaky test lives in tests/integration/test_team.py::test_breaker_{r.randrange(99)}",
                         f"logs rotate at /var/log/acme/payments-{r.randrange(9)}.log",
                         f"https://github.com/acme/payments/pull/{r.randrange(5000)}#discussion_r{r.randrange(10**9)}"])

    def prose(r):
        return r.choice(PROSE)

    return [
        ("prose", prose), ("git_sha", git_sha), ("sha256_hex", sha256_hex), ("sha1_md5", sha1_md5),
        ("uuid", uuid_note), ("docker_digest", docker_digest), ("base64_json", b64_json),
        ("base64_text", b64_text), ("base64_image", b64_image), ("sri_hash", sri), ("ssh_public_key", ssh_pub),
        ("mnemo_ids", mnemo_ids), ("public_key_block", public_key_block), ("versions_paths_urls", semver_paths),
    ]


def corpus(seed: int = 20240601, per_secret_format: int = 10, harmless: int = 600):
    """(secrets, harmless): lists of (category, text, secret value or None); deterministic for a seed."""
    r = random.Random(seed)
    secrets = []
    for cat, gen in _secret_generators():
        for _ in range(per_secret_format):
            text, value = gen(r)
            secrets.append((cat, text, value))
    gens = _harmless_generators()
    notes = []
    for i in range(harmless):
        cat, gen = gens[i % len(gens)]
        notes.append((cat, gen(r), None))
    return secrets, notes


__all__ = ["corpus", "PROSE"]


# Written separately from the tuning corpus above, to check that the scanner was not fitted to its templates:
# realistic notes a team writes down, some with the words key/token/secret/password in ordinary senses.
HELD_OUT_HARMLESS = [
    "the S3 bucket is arn:aws:s3:::acme-logs-prod; lifecycle moves objects to Glacier after 30 days",
    "k8s secret payments-db-credentials lives in namespace prod; mount it, never bake it into the image",
    "the OAuth token endpoint is https://auth.acme.io/oauth/token and the device flow uses /oauth/device",
    "api_key_header = 'X-Api-Key' in gateway.yaml",
    "session_token_ttl = 3600 and refresh_token_ttl = 1209600 (two weeks)",
    "SECRET_KEY must be set in production, see settings.py; Django refuses to start without it",
    "token_budget=2000 tokens per request for the summarizer",
    "auth: oauth2-client-credentials for service-to-service calls",
    "the primary key of orders is (tenant_id, order_id); use a composite index",
    "keyboard shortcut ctrl+shift+p opens the palette; cmd on macOS",
    "sort_key=lambda c: (-c.score, c.scope_priority, c.id) keeps ties deterministic",
    "the hash of the anchored code is sha256 over the symbol's text, truncated to 32 hex characters",
    "Mnemo ids: mem-3f9a0c1b2d4e5f6a7b8c, blk-0a1b2c3d4e5f6a7b8c9d, team-mem-aa11bb22cc33dd44ee55",
    "content_hash 9f86d081884c7d659a2feaa0c55ad015 is the normalized text hash of the test note",
    "git rev-parse HEAD printed 1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e on the release branch",
    "uuid4 like f47ac10b-58cc-4372-a567-0e02b2c3d479 are fine as correlation ids",
    "image digest sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 is the empty layer",
    "the base64 of 'hello' is aGVsbG8= (useful to check the decoder)",
    "JWT header eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9 decodes to alg HS256; never log the full token",
    "integrity sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg==",
    "the password policy requires 12 characters, one digit and one symbol",
    "rotate the signing key quarterly; the key id (kid) is in the JWKS at /.well-known/jwks.json",
    "tokenizer.json ships truncation at 128; override it to 256 for MiniLM",
    "use the secrets module (secrets.token_urlsafe(32)) for reset tokens, never random",
    "bearer tokens are validated by the gateway; services trust X-User-Id",
    "the CSRF token is rotated per session and sent in the X-CSRF-Token header",
    "pass --no-verify only for WIP commits on a personal branch",
    "env var names: DATABASE_URL, REDIS_URL, SENTRY_DSN, STRIPE_SECRET_KEY (values come from Vault)",
    "DATABASE_URL=postgres://localhost/payments_dev works without a password on the dev box",
    "redis://localhost:6379/0 is the local broker; the prod one needs TLS",
    "https://user@github.com/acme/payments.git is the old remote; switch to ssh",
    "AWS account 123456789012 is prod; 210987654321 is staging",
    "the Stripe test card 4242 4242 4242 4242 with any future expiry works in test mode",
    "LangChain callback handler names: on_llm_start, on_llm_end, on_tool_error",
    "consumer group payments-ledger-v2 reads topic ledger.events.v3 with 12 partitions",
    "the CDN cache key is host+path+query; vary on Accept-Encoding only",
    "a 429 from the API means the token bucket is empty; back off with jitter",
    "wiki page: https://wiki.acme.io/display/ENG/Payments+Runbook#PaymentsRunbook-Rollback",
    "npm package @acme/payments-sdk@3.4.1 pins axios 1.6.8",
    "protobuf field 7 (idempotency_key) is a string; 36 chars max",
    "log line format: ts=2024-05-01T12:00:00Z level=info msg=charged order_id=ord_7Hn2Kq amount=1999",
    "the feature flag key is checkout.new_flow.enabled",
    "the key rotation job runs at 03:00 UTC from cron on the ops host",
    "set PYTHONHASHSEED=0 in tests so set ordering is stable",
    "TOTP codes are 6 digits and valid for 30 seconds",
    "public key fingerprint SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8 belongs to the bastion",
    "the password reset link expires after 20 minutes",
    "ConfigMap key app.properties holds log.level=info and pool.size=20",
    "HMAC signatures use the raw request body; compare with hmac.compare_digest",
    "the AbstractPaymentProviderAdapterFactoryImpl class is generated; do not edit",
]


def held_out_secrets(seed: int = 77) -> list[tuple[str, str, str]]:
    """Secrets in phrasings the tuning corpus does not use."""
    r = random.Random(seed)
    out = []
    for _ in range(3):
        ak = "AKIA" + _s(r, UPPER + "234567", 16)
        sk = _mixed(r, 40, B64)
        out.append(("aws_profile", f"[default]\naws_access_key_id={ak}\naws_secret_access_key={sk}", sk))
        gh = "ghp_" + _mixed(r, 36)
        out.append(("git_remote_token", f"git remote set-url origin https://x-access-token:{gh}@github.com/acme/x.git",
                    gh))
        pw = _password(r).replace("@", "x").replace("/", "x").replace(":", "x").replace("#", "x")
        out.append(("dotenv_password", f"# .env for staging\nDB_USER=app\nDB_PASS={pw}\n", pw))
        tok = _mixed(r, 40)
        out.append(("yaml_token", f"sentry:\n  dsn: https://public@o1.ingest.sentry.io/1\n  auth_token: {tok}", tok))
        key = _mixed(r, 32)
        out.append(("header_api_key", f"curl -H \"X-Api-Key: {key}\" https://api.acme.io/v1/health", key))
        sec = _mixed(r, 36)
        out.append(("json_secret", json.dumps({"client_id": "payments-cli", "client_secret": sec}), sec))
        pw2 = _password(r)
        out.append(("prose_password2", f"ssh into the box as root, the password was {pw2} last time I checked",
                    pw2))
        stripe = "sk_live_" + _mixed(r, 99)
        out.append(("stripe_long", f"Stripe restricted: {stripe}", stripe))
        jwt = _jwt(r)
        out.append(("cookie_jwt", f"Cookie: session={jwt}; Path=/; HttpOnly", jwt))
        pem = _pem(r, "OPENSSH PRIVATE KEY")
        out.append(("pem_in_yaml", "deploy_key: |\n  " + pem.replace("\n", "\n  "), pem.split("\n")[1]))
    return out
