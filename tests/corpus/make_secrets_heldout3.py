"""Write the third held-out secret corpus: secrets_heldout3_positive.jsonl and
secrets_heldout3_negative.jsonl.

    .venv/bin/python tests/corpus/make_secrets_heldout3.py

Written after the second held-out corpus (make_secrets_heldout2.py) had been measured once and
before anything was changed because of what it missed: the scanner's fixes for the second
held-out corpus were made after this file was committed. It was measured once, untouched
(commit 8cd1120): 31 of 44 caught (70.5%), 1 of 60 look-alikes refused (1.67%). After that it
was tuned on too, so no corpus here is unseen any more: the next held-out corpus should be
written, and measured once, before the scanner changes again. Lines have the shape of the
other corpora; every value is made up from a fixed seed.
"""

from __future__ import annotations

import base64
import json
import random
import string
import uuid
from pathlib import Path

HERE = Path(__file__).parent
SEED = 20261203
R = random.Random(SEED)

ALNUM = string.ascii_letters + string.digits
LOWER_ALNUM = string.ascii_lowercase + string.digits
UPPER_ALNUM = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
URLSAFE = ALNUM + "-_"
B64 = ALNUM + "+/"


def rand(alphabet: str, n: int) -> str:
    while True:
        value = "".join(R.choice(alphabet) for _ in range(n))
        need = [
            c
            for c in (string.ascii_uppercase, string.ascii_lowercase, string.digits)
            if any(ch in alphabet for ch in c)
        ]
        if n < 8 or all(any(ch in c for ch in value) for c in need):
            return value


def hexs(n: int) -> str:
    while True:
        value = "".join(R.choice(HEX) for _ in range(n))
        if any(c.isalpha() for c in value) and any(c.isdigit() for c in value):
            return value


def password() -> str:
    words = [
        "Osprey",
        "canyon",
        "Pelican",
        "juniper",
        "Comet",
        "tangerine",
        "Ridge",
        "willow",
        "Falcon",
        "harvest",
        "Quill",
        "basalt",
    ]
    parts = [R.choice(words), str(R.randint(10, 9999)), R.choice("!#%*+-_.@^")]
    R.shuffle(parts)
    return "".join(parts) + rand(ALNUM, 3)


def uid() -> str:
    return str(uuid.UUID(int=R.getrandbits(128), version=4))


def b64(n: int) -> str:
    return base64.b64encode(R.randbytes(n)).decode()


def positives() -> list[dict[str, str]]:
    out: list[dict[str, str]] = []

    def add(form: str, template: str, secret: str) -> None:
        out.append({"form": form, "text": template.replace("{S}", secret), "secret": secret})

    # -- env files and configs --------------------------------------------------------------
    add("shopify api secret", "SHOPIFY_API_SECRET={S}", hexs(32))
    add("auth0 client secret", "AUTH0_CLIENT_SECRET={S}", rand(URLSAFE, 64))
    add("session password", "NUXT_SESSION_PASSWORD={S}", rand(ALNUM, 32))
    add("cookie secret", "COOKIE_SECRET={S}", rand(ALNUM, 40))
    add("hmac key", "HMAC_KEY={S}", hexs(64))
    add("webhook signing key", "WEBHOOK_SIGNING_KEY={S}", rand(URLSAFE, 43))
    add("redis auth", "REDIS_AUTH={S}", rand(ALNUM, 32))
    add("json clientSecret", '{"clientId": "web", "clientSecret": "{S}"}', rand(URLSAFE, 40))
    add("yaml apiSecret", "stream:\n  apiKey: mz8p3wq\n  apiSecret: {S}", rand(ALNUM, 40))
    add(
        "yaml secretAccessKey",
        "s3:\n  accessKeyId: AKIA" + rand(UPPER_ALNUM, 16)[:0] + "minio\n  secretAccessKey: {S}",
        rand(B64, 40),
    )
    add(
        "ldap bind password",
        "ldap:\n  bindDN: cn=svc,dc=acme,dc=io\n  bindPassword: {S}",
        password(),
    )
    add("keystore password properties", "server.ssl.key-store-password={S}", password())
    add("spring mail password", "spring.mail.password={S}", password())
    add("toml api_token", '[cloudflare]\napi_token = "{S}"', rand(URLSAFE, 40))

    # -- command lines -------------------------------------------------------------------------
    add("mysql --password=", "mysql --user=app --password={S} shop", password())
    add(
        "wget --password",
        "wget --user=ci --password={S} https://files.acme.io/build.zip",
        password(),
    )
    add("lftp -u", "lftp -u deploy,{S} sftp://files.acme.io", password())
    add("rsync url", "rsync -av ./dist rsync://deploy:{S}@mirror.acme.io/www/", password())
    add(
        "pip index url",
        "pip install --index-url https://ci:{S}@pypi.acme.io/simple acme-core",
        rand(ALNUM, 24),
    )
    add("docker run -e token", "docker run -e API_TOKEN={S} acme/worker:3", rand(ALNUM, 32))
    add(
        "az login sp",
        "az login --service-principal -u " + uid() + " -p {S} --tenant acme.onmicrosoft.com",
        rand(ALNUM, 3) + "8Q~" + rand(URLSAFE, 31),
    )
    add("aws configure set", "aws configure set aws_secret_access_key {S}", rand(B64, 40))
    add("fly secrets set", "fly secrets set DB_PASSWORD={S}", password())
    add(
        "kubectl from-literal api-key",
        "kubectl create secret generic api --from-literal=api-key={S}",
        rand(ALNUM, 32),
    )
    add("gh with-token", "gh auth login --with-token <<< {S}", "ghp_" + rand(ALNUM, 36))

    # -- code in several languages ------------------------------------------------------------
    add("java string literal", 'String secret = "{S}";', rand(ALNUM, 32))
    add("csharp var token", 'var token = "{S}";', rand(URLSAFE, 40))
    add("r assignment", 'api_key <- "{S}"', hexs(32))
    add("php variable", "$apiKey = '{S}';", rand(ALNUM, 32))
    add("swift let password", 'let password = "{S}"', password())
    add("kotlin val secret", 'val clientSecret = "{S}"', rand(URLSAFE, 40))
    add("ruby config", 'config.api_key = "{S}"', rand(ALNUM, 32))
    add("go const", 'const apiToken = "{S}"', rand(ALNUM, 40))

    # -- prose -------------------------------------------------------------------------------
    add("prose wifi password", "the office wifi password: {S}", password())
    add("prose creds slash", "staging DB creds are admin / {S}", password())
    add("prose use as password", "use {S} as the password for the jump host", password())
    add("prose pw colon", "pw: {S}", password())

    # -- provider tokens ---------------------------------------------------------------------
    add("plaid access token", "plaid item token {S}", "access-production-" + uid())
    add(
        "twitch oauth",
        "twitch chat bot logs in with oauth:{S}",
        rand(string.ascii_lowercase + string.digits, 30),
    )
    add("hubspot private app", "hubspot token {S}", "pat-na1-" + uid())
    add("1password service account", "OP_SERVICE_ACCOUNT_TOKEN={S}", "ops_eyJ" + rand(URLSAFE, 300))
    add("expo access token", "expo token {S}", "expo_" + rand(ALNUM, 40))
    add("honeycomb ingest key", "honeycomb key {S}", "hcaik_" + rand(LOWER_ALNUM, 58))
    add("stytch secret", "stytch project secret {S}", "secret-live-" + rand(URLSAFE, 36))
    return out


def negatives() -> list[dict[str, str]]:
    out: list[dict[str, str]] = []

    def add(form: str, *texts: str) -> None:
        out.extend({"form": form, "text": text} for text in texts)

    add(
        "code that reads secrets",
        "apiKey: process.env.API_KEY!,",
        "password: ${{ secrets.DB_PASSWORD }}",
        "String password = args[0];",
        'api_key <- Sys.getenv("API_KEY")',
        "$apiKey = getenv('API_KEY');",
        'let token = try keychain.get("token")',
        "val secret = BuildConfig.CLIENT_SECRET",
        'config.api_key = ENV["API_KEY"]',
        'const apiToken = os.Getenv("API_TOKEN")',
        'var token = Environment.GetEnvironmentVariable("TOKEN");',
        "password_confirmation = params[:password_confirmation]",
        'api_key_prefix = "sk_live_"',
        'secret = Secret(name="db", version=3)',
        "clientSecret: configService.get('OAUTH_SECRET'),",
        "aws configure set region eu-west-1",
        "fly secrets list",
        "gh auth login --with-token < token.txt",
        "az login --identity",
        "mysql --defaults-file=/etc/mysql/app.cnf shop",
        "wget --ask-password https://files.acme.io/build.zip",
        "lftp -u deploy sftp://files.acme.io",
        "rsync -av ./dist deploy@mirror.acme.io:/www/",
    )
    add(
        "ids, tags and digests",
        f"ghcr.io/acme/api:main-{hexs(40)}",
        f"release-2026.06.01-{hexs(7)} is live",
        f"build-{hexs(32)}.log was uploaded",
        f"trace-{uid()} took 3.2 s",
        f"HubSpot portal {R.randint(10**7, 10**8)} and form {uid()}",
        f"Plaid item_id {rand(ALNUM, 37)} is healthy",
        f"Twitch user id {R.randint(10**8, 10**9)}",
        f"expo project id {uid()}",
        f"honeycomb dataset prod-api, team acme-{rand(LOWER_ALNUM, 6)}",
        f"1Password item id {rand(LOWER_ALNUM, 26)}",
        f'"integrity": "sha512-{b64(64)}"',
        f"golang.org/x/net v0.24.0 h1:{b64(32)}",
        f"x-request-id: {uid()}",
        f"commit {hexs(40)} (HEAD -> main, origin/main)",
        f"Merge pull request #4821 from acme/fix-{hexs(7)}",
        f"dpl_{rand(ALNUM, 28)} promoted to production",
        f"image digest sha256:{hexs(64)}",
        f"AAAAB3NzaC1yc2EAAAADAQABAAABAQ{rand(B64, 60)} is the start of the public key",
    )
    add(
        "prose about credentials",
        "the password policy requires 12 characters and a symbol",
        "token-based auth replaced sessions in 2024",
        "keyless signing with sigstore; no private key on the runner",
        "scripts/rotate-secrets.sh runs every Monday",
        ".github/workflows/secret-scanning.yml blocks pushes with tokens",
        "the api key field is optional for self-hosted installs",
        "pw reset emails are sent by the worker",
        "creds live in Vault under secret/data/app",
        "use the deploy key, not a personal token, for CI clones",
        "the wifi password is on the whiteboard in room 4",
        "oauth: the callback must be https in production",
        "pat tokens expire after 90 days by policy",
        "ops_ tokens are 1Password service accounts; ours is in the CI secrets",
        "access-production tokens from Plaid never leave the backend",
        "secret-live and secret-test are Stytch's prefixes",
        "HMAC_KEY must be 32 bytes of hex",
        "COOKIE_SECRET rotates with every deploy",
        "AUTH0_CLIENT_SECRET comes from the Auth0 dashboard",
        "set REDIS_AUTH only when the server has requirepass on",
        "bindPassword is read from the LDAP secret at start-up",
    )
    return out


def build() -> dict[str, str]:
    """The third held-out corpus files' names and contents."""
    R.seed(SEED)
    files = {}
    for name, rows in (
        ("secrets_heldout3_positive.jsonl", positives()),
        ("secrets_heldout3_negative.jsonl", negatives()),
    ):
        files[name] = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    return files


def main() -> None:
    for name, text in build().items():
        (HERE / name).write_text(text, encoding="utf-8")
        print(f"{name}: {text.count(chr(10))} texts")


if __name__ == "__main__":
    main()
