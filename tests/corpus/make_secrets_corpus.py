"""Write the secret scanner's corpora: tests/corpus/secrets_positive.jsonl and secrets_negative.jsonl.

    .venv/bin/python tests/corpus/make_secrets_corpus.py

Positive lines are {"form": ..., "text": ..., "secret": ...}: a text as a coding agent might write
it, holding one credential, and the exact part of the text that is the credential (what redaction
must replace, and what no error message may quote). Negative lines are {"form": ..., "text": ...}:
ordinary text that must be stored as it is.

Every value is made up here from a fixed seed: correctly shaped (prefix, alphabet, length), random
characters, never a real credential. Rerunning the script writes the same files.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import uuid
from pathlib import Path

HERE = Path(__file__).parent
SEED = 20260415
R = random.Random(SEED)

ALNUM = string.ascii_letters + string.digits
LOWER_ALNUM = string.ascii_lowercase + string.digits
HEX = "0123456789abcdef"
URLSAFE = ALNUM + "-_"
B64 = ALNUM + "+/"


def rand(alphabet: str, n: int) -> str:
    """Random characters, with at least one upper case letter, lower case letter and digit
    where the alphabet has them (so that no value is accidentally a word or a number)."""
    while True:
        value = "".join(R.choice(alphabet) for _ in range(n))
        need = [
            c
            for c in (string.ascii_uppercase, string.ascii_lowercase, string.digits)
            if any(ch in alphabet for ch in c)
        ]
        if n < 8 or all(any(ch in c for ch in value) for c in need):
            return value


def password() -> str:
    """A human-made password: a word, digits and a symbol, in some order."""
    words = [
        "Falcon",
        "river",
        "Maple",
        "orbit",
        "Quartz",
        "tundra",
        "Copper",
        "violet",
        "Nimbus",
        "harbor",
        "Sable",
        "cobalt",
        "Juniper",
        "ember",
    ]
    parts = [R.choice(words), str(R.randint(10, 9999)), R.choice("!#%*+-_.@^")]
    R.shuffle(parts)
    return "".join(parts) + rand(ALNUM, 3)


def machine_password(n: int = 20) -> str:
    return rand(ALNUM + "!#%*+-_.^~", n)


def jwt() -> str:
    header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').rstrip(b"=").decode()
    body = (
        base64.urlsafe_b64encode(
            json.dumps(
                {
                    "sub": str(R.randint(10**5, 10**6)),
                    "name": "ci-bot",
                    "iat": R.randint(1_700_000_000, 1_800_000_000),
                },
                separators=(",", ":"),
            ).encode()
        )
        .rstrip(b"=")
        .decode()
    )
    return f"{header}.{body}.{rand(URLSAFE, 43)}"


def pem(kind: str = "RSA ", lines: int = 4, sep: str = "\n") -> str:
    body = sep.join(rand(B64, 64) for _ in range(lines))
    return f"-----BEGIN {kind}PRIVATE KEY-----{sep}{body}{sep}-----END {kind}PRIVATE KEY-----"


def ghp(prefix: str = "ghp_") -> str:
    return prefix + rand(ALNUM, 36)


def hexs(n: int) -> str:
    return "".join(R.choice(HEX) for _ in range(n))


def aws_secret() -> str:
    return rand(B64, 40)


def positives() -> list[dict[str, str]]:
    out: list[dict[str, str]] = []

    def add(form: str, template: str, secret: str) -> None:
        out.append({"form": form, "text": template.replace("{S}", secret), "secret": secret})

    # -- provider token formats ------------------------------------------------------------------
    add("github ghp", "export GITHUB_TOKEN={S}", ghp())
    add("github ghp prose", "CI pushes tags with {S} (rotated in March)", ghp())
    add("github gho", "the OAuth app returned {S} for the test user", ghp("gho_"))
    add("github ghu", "user-to-server token {S} expires in 8 hours", ghp("ghu_"))
    add("github ghs", "installation token: {S}", ghp("ghs_"))
    add("github ghr", "refresh token {S} came back from the device flow", ghp("ghr_"))
    add(
        "github fine-grained",
        "fine-grained PAT for the release bot is {S}",
        "github_pat_" + rand(ALNUM, 22) + "_" + rand(ALNUM, 59),
    )
    add(
        "github fine-grained env",
        "GH_TOKEN={S} gh release create v1.4.0",
        "github_pat_" + rand(ALNUM, 22) + "_" + rand(ALNUM, 59),
    )
    add("github header", 'curl -H "Authorization: token {S}" https://api.github.com/user', ghp())
    add("gitlab pat", "GITLAB_TOKEN: {S}", "glpat-" + rand(URLSAFE, 20))
    add(
        "gitlab pat prose",
        "used {S} to trigger the pipeline via the API",
        "glpat-" + rand(URLSAFE, 20),
    )
    add("gitlab deploy token", "deploy token {S} for the registry", "gldt-" + rand(URLSAFE, 20))
    add(
        "slack bot",
        "SLACK_BOT_TOKEN={S}",
        f"xoxb-{R.randint(10**10, 10**11)}-{R.randint(10**12, 10**13)}-{rand(ALNUM, 24)}",
    )
    add(
        "slack user",
        "posting as me with {S}",
        f"xoxp-{R.randint(10**10, 10**11)}-{R.randint(10**10, 10**11)}-"
        f"{R.randint(10**12, 10**13)}-{hexs(32)}",
    )
    add("slack app", "slack app token {S}", f"xoxa-2-{R.randint(10**10, 10**11)}-{rand(ALNUM, 30)}")
    add("slack refresh", "refresh with {S}", f"xoxr-{R.randint(10**10, 10**11)}-{rand(ALNUM, 40)}")
    add(
        "slack webhook",
        "alerts go to {S}",
        f"https://hooks.slack.com/services/T{rand(string.ascii_uppercase + string.digits, 8)}"
        f"/B{rand(string.ascii_uppercase + string.digits, 10)}/{rand(ALNUM, 24)}",
    )
    add("stripe secret", "STRIPE_SECRET_KEY={S}", "sk_live_" + rand(ALNUM, 24))
    add("stripe restricted", "the reporting job uses {S}", "rk_live_" + rand(ALNUM, 24))
    add("stripe test secret", "stripe.api_key = '{S}'", "sk_test_" + rand(ALNUM, 24))
    add("stripe webhook", "STRIPE_WEBHOOK_SECRET={S}", "whsec_" + rand(ALNUM, 32))
    add(
        "aws access key",
        "access key id {S} belongs to the deploy user",
        "AKIA" + rand(string.ascii_uppercase + "234567", 16),
    )
    add("aws sts key", "temporary creds: {S}", "ASIA" + rand(string.ascii_uppercase + "234567", 16))
    add("aws secret env", "AWS_SECRET_ACCESS_KEY={S}", aws_secret())
    add("aws secret env export", "export AWS_SECRET_ACCESS_KEY={S}", aws_secret())
    add(
        "aws secret credentials file",
        "[default]\naws_access_key_id = AKIA"
        + rand(string.ascii_uppercase + "234567", 16)
        + "\naws_secret_access_key = {S}",
        aws_secret(),
    )
    add("aws secret ini", "aws_secret_access_key = {S}", aws_secret())
    add(
        "aws secret json",
        '{"AccessKeyId": "ASIA' + rand(string.ascii_uppercase, 16) + '", "SecretAccessKey": "{S}"}',
        aws_secret(),
    )
    add("aws session token", "export AWS_SESSION_TOKEN={S}", "IQoJb3JpZ2luX2Vj" + rand(B64, 120))
    add("google api key", "maps key {S} is restricted to the web app", "AIza" + rand(URLSAFE, 35))
    add(
        "google api key url",
        "https://maps.googleapis.com/maps/api/geocode/json?address=x&key={S}",
        "AIza" + rand(URLSAFE, 35),
    )
    add("google oauth secret", '"client_secret": "{S}"', "GOCSPX-" + rand(URLSAFE, 28))
    add(
        "google oauth secret prose", "the OAuth client secret is {S}", "GOCSPX-" + rand(URLSAFE, 28)
    )
    add("google access token", "gcloud printed {S}", "ya29." + rand(URLSAFE, 80))
    add("openai legacy", "OPENAI_API_KEY={S}", "sk-" + rand(ALNUM, 48))
    add("openai project", "set the key to {S} in the notebook", "sk-proj-" + rand(URLSAFE, 120))
    add("openai service account", "svc key {S}", "sk-svcacct-" + rand(URLSAFE, 100))
    add("anthropic", 'ANTHROPIC_API_KEY="{S}"', "sk-ant-api03-" + rand(URLSAFE, 93) + "AA")
    add("anthropic prose", "the eval harness reads {S}", "sk-ant-api03-" + rand(URLSAFE, 93) + "AA")
    add("npm token", "npm token create gave {S}", "npm_" + rand(ALNUM, 36))
    add("npmrc", "//registry.npmjs.org/:_authToken={S}", "npm_" + rand(ALNUM, 36))
    add(
        "npmrc legacy uuid",
        "//registry.npmjs.org/:_authToken={S}",
        str(uuid.UUID(int=R.getrandbits(128))),
    )
    add("pypi token", "TWINE_PASSWORD={S}", "pypi-AgEIcHlwaS5vcmc" + rand(URLSAFE, 120))
    add(
        "pypirc",
        "[pypi]\nusername = __token__\npassword = {S}",
        "pypi-AgEIcHlwaS5vcmc" + rand(URLSAFE, 120),
    )
    add("hugging face", "HF_TOKEN={S}", "hf_" + rand(ALNUM, 34))
    add("hugging face cli", "huggingface-cli login --token {S}", "hf_" + rand(ALNUM, 34))
    add("google oauth env", "GOOGLE_CLIENT_SECRET={S}", "GOCSPX-" + rand(URLSAFE, 28))
    add("vault", "VAULT_TOKEN={S} vault kv get secret/app", "hvs." + rand(URLSAFE, 24))
    add("vault login", "vault login {S}", "hvs." + rand(URLSAFE, 90))
    add("docker hub", "docker login -u ci -p {S}", "dckr_pat_" + rand(URLSAFE, 27))
    add(
        "docker hub prose",
        "Docker Hub token {S} has read-only scope",
        "dckr_pat_" + rand(URLSAFE, 27),
    )
    add("twilio api key", "Twilio API key {S}", "SK" + hexs(32))
    add("twilio auth token", "TWILIO_AUTH_TOKEN={S}", hexs(32))
    add("sendgrid", "SENDGRID_API_KEY={S}", "SG." + rand(URLSAFE, 22) + "." + rand(URLSAFE, 43))
    add(
        "sendgrid prose",
        "mail goes through {S}",
        "SG." + rand(URLSAFE, 22) + "." + rand(URLSAFE, 43),
    )
    add("mailchimp", "mailchimp key {S}", hexs(32) + "-us" + str(R.randint(1, 21)))
    add("shopify", "SHOPIFY_ACCESS_TOKEN={S}", "shpat_" + hexs(32))
    add("telegram", "bot token {S}", f"{R.randint(10**8, 10**9)}:AA{rand(URLSAFE, 33)}")
    add("square", "square access token {S}", "sq0atp-" + rand(URLSAFE, 22))
    add(
        "azure storage",
        "DefaultEndpointsProtocol=https;AccountName=stapp;AccountKey={S};"
        "EndpointSuffix=core.windows.net",
        rand(B64, 86) + "==",
    )
    add(
        "azure sas",
        "https://stapp.blob.core.windows.net/c/f.zip?sv=2022-11-02&sp=r"
        "&se=2026-05-01T00:00:00Z&sig={S}",
        rand(ALNUM, 43) + "%3D",
    )
    add("private key rsa", "deploy key:\n{S}", pem("RSA "))
    add("private key openssh", "{S}", pem("OPENSSH "))
    add("private key ec", "the signing key is\n{S}\nkeep it out of git", pem("EC ", 3))
    add("private key pkcs8", "{S}", pem("", 5))
    add("private key encrypted", "{S}", pem("ENCRYPTED ", 5))
    add("private key json escaped", '"private_key": "{S}\\n",', pem("", 4, "\\n"))
    add(
        "private key pgp",
        "{S}",
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n"
        + "\n".join(rand(B64, 64) for _ in range(4))
        + "\n-----END PGP PRIVATE KEY BLOCK-----",
    )
    add("jwt", "session cookie was {S}", jwt())
    add("jwt bearer", "Authorization: Bearer {S}", jwt())
    add("jwt json", '"id_token": "{S}"', jwt())

    # -- credentials in URLs --------------------------------------------------------------------
    add("url postgres", "DATABASE_URL=postgres://app:{S}@db.internal:5432/app", password())
    add(
        "url postgresql",
        'SQLALCHEMY_DATABASE_URI = "postgresql+psycopg://svc:{S}@10.2.0.4/orders"',
        machine_password(16),
    )
    add("url mysql", "connect with mysql://root:{S}@127.0.0.1:3306/shop", password())
    add(
        "url mongodb",
        "mongodb+srv://admin:{S}@cluster0.x1y2z.mongodb.net/?retryWrites=true",
        rand(ALNUM, 16),
    )
    add("url redis no user", "REDIS_URL=redis://:{S}@cache.internal:6379/0", rand(ALNUM, 24))
    add(
        "url rediss",
        "rediss://default:{S}@redis-12345.c1.cloud.redislabs.com:12345",
        rand(ALNUM, 32),
    )
    add("url amqp", "broker amqp://worker:{S}@rabbit:5672/vhost", password())
    add("url git https", "git remote add origin https://alice:{S}@github.com/acme/api.git", ghp())
    add("url git token user", "https://x-access-token:{S}@github.com/acme/site.git", ghp("ghs_"))
    add(
        "url gitlab oauth2",
        "git clone https://oauth2:{S}@gitlab.com/acme/infra.git",
        "glpat-" + rand(URLSAFE, 20),
    )
    add("url ftp", "upload to ftp://deploy:{S}@files.acme.io/releases", password())

    # -- headers --------------------------------------------------------------------------------
    add("header bearer", "Authorization: Bearer {S}", rand(ALNUM, 40))
    add(
        "header bearer curl",
        'curl -H "Authorization: Bearer {S}" https://api.acme.io/v2/me',
        rand(URLSAFE, 48),
    )
    add(
        "header basic",
        "Authorization: Basic {S}",
        base64.b64encode(f"admin:{password()}".encode()).decode(),
    )
    add("header x-api-key", "X-Api-Key: {S}", rand(ALNUM, 32))
    add("header x-api-key curl", "curl -H 'x-api-key: {S}' https://api.acme.io", rand(ALNUM, 40))
    add("header api-key", "api-key: {S}", hexs(32))
    add("header dict", 'headers = {"Authorization": "Bearer {S}"}', rand(URLSAFE, 40))

    # -- shell commands -------------------------------------------------------------------------
    add("pgpassword", "PGPASSWORD={S} psql -h db.internal -U app app", password())
    add("mysql -p", "mysql -u root -p{S} shop < schema.sql", password())
    add("mysqldump -p", "mysqldump -uroot -p{S} --all-databases > all.sql", machine_password(14))
    add("curl -u", "curl -u admin:{S} https://jenkins.internal/api/json", password())
    add("curl --user", "curl --user deploy:{S} -X POST https://nexus.acme.io/upload", password())
    add("docker login -p", "docker login registry.acme.io -u bot -p {S}", machine_password(24))
    add(
        "docker login --password",
        "docker login --username bot --password {S} ghcr.io",
        machine_password(24),
    )
    add("sshpass", "sshpass -p '{S}' ssh deploy@10.0.3.7", password())
    add("--password=", "./manage.py createsuperuser --password={S}", password())
    add("--token", "terraform login --token {S}", rand(ALNUM, 14) + ".atlasv1." + rand(ALNUM, 60))
    add("--api-key", "datadog-ci upload --api-key {S}", hexs(32))
    add("redis-cli -a", "redis-cli -h cache -a {S} ping", rand(ALNUM, 20))
    add("httpie -a", "http -a ops:{S} GET https://grafana.acme.io/api/health", password())
    add(
        "kubectl literal",
        "kubectl create secret generic db --from-literal=password={S}",
        password(),
    )
    add("helm set", "helm upgrade app ./chart --set auth.password={S}", password())

    # -- .env lines -----------------------------------------------------------------------------
    add("env PASSWORD", "PASSWORD={S}", password())
    add("env DB_PASSWORD", "DB_PASSWORD={S}", password())
    add("env API_KEY", "API_KEY={S}", rand(ALNUM, 32))
    add("env export quoted", 'export DB_PASSWORD="{S}"', password())
    add("env single quoted", "SECRET_KEY='{S}'", machine_password(50))
    add("env JWT_SECRET", "JWT_SECRET={S}", rand(ALNUM, 48))
    add("env NEXTAUTH_SECRET", "NEXTAUTH_SECRET={S}", base64.b64encode(R.randbytes(32)).decode())
    add("env SMTP_PASS", "SMTP_PASS={S}", password())
    add("env lower-case letters only", "REDIS_PASSWORD={S}", "bluesteelorchard")
    add("env MYSQL_ROOT_PASSWORD", "MYSQL_ROOT_PASSWORD={S}", password())
    add(
        "env laravel APP_KEY", "APP_KEY={S}", "base64:" + base64.b64encode(R.randbytes(32)).decode()
    )
    add("env CLIENT_SECRET", "OAUTH_CLIENT_SECRET={S}", rand(URLSAFE, 40))
    add("env ENCRYPTION_KEY", "ENCRYPTION_KEY={S}", hexs(64))
    add("env windows set", "set DB_PASSWORD={S}", password())
    add("env powershell", '$env:API_KEY = "{S}"', rand(ALNUM, 32))
    add(
        "env several lines",
        "DB_HOST=db.internal\nDB_USER=app\nDB_PASSWORD={S}\nDB_PORT=5432",
        password(),
    )

    # -- configuration files --------------------------------------------------------------------
    add("yaml password", "password: {S}", password())
    add("yaml nested", "database:\n  host: db.internal\n  user: app\n  password: {S}", password())
    add("yaml quoted", '  password: "{S}"', password())
    add("compose env", "environment:\n  POSTGRES_PASSWORD: {S}", password())
    add("yaml client_secret", "client_secret: {S}", rand(URLSAFE, 40))
    add("yaml auth_token", "auth_token: {S}", rand(ALNUM, 32))
    add("json api_key", '{"api_key": "{S}", "region": "eu-west-1"}', rand(ALNUM, 32))
    add("json password", '"password": "{S}"', password())
    add("json accessToken", '{"accessToken":"{S}","expiresIn":3600}', rand(URLSAFE, 64))
    add("toml secret", 'secret = "{S}"', rand(ALNUM, 40))
    add("toml token", '[registry]\ntoken = "{S}"', rand(ALNUM, 32))
    add("js apiKey", "const client = new Client({ apiKey: '{S}' });", rand(ALNUM, 40))
    add("js const API_KEY", 'const API_KEY = "{S}";', rand(ALNUM, 32))
    add("python literal", 'db.connect(user="app", password="{S}")', password())
    add("php array", "'password' => '{S}',", password())
    add("java properties", "spring.datasource.password={S}", password())
    add(
        "xml maven",
        "<server><id>nexus</id><username>ci</username><password>{S}</password></server>",
        password(),
    )
    add("netrc", "machine api.acme.io login bot password {S}", password())
    add("my.cnf", "[client]\nuser=root\npassword={S}", password())
    add("access_token toml", 'access_token = "{S}"', rand(URLSAFE, 40))

    # -- query strings --------------------------------------------------------------------------
    add(
        "query api_key",
        "GET https://api.weather.io/v1/forecast?city=Oslo&api_key={S}",
        rand(ALNUM, 32),
    )
    add("query token", "webhook https://ci.acme.io/hook?project=web&token={S}", rand(ALNUM, 40))
    add("query access_token", "https://graph.acme.io/me?access_token={S}", rand(URLSAFE, 64))
    add("query apikey", "https://api.acme.io/items?apikey={S}&page=2", hexs(32))
    add("query client_secret", "/oauth/token?client_id=web&client_secret={S}", rand(URLSAFE, 40))

    # -- prose ----------------------------------------------------------------------------------
    add("prose password is", "the staging DB password is {S}", password())
    add("prose secret is", "the webhook secret is {S} until we rotate it", rand(ALNUM, 24))
    add("prose password for", "the root password for the staging box is {S}", password())
    add("prose with password", "ssh root@10.0.0.5 with password {S}", password())
    add("prose api key", "api key: {S}", rand(ALNUM, 24))
    add("prose login / password", "login: bob / password: {S}", password())

    # -- more forms in the wild -----------------------------------------------------------------
    add("yaml upper key quoted", "DATABASE_PASSWORD: '{S}'", password())
    add("github token yaml", "GITHUB_TOKEN: {S}", ghp())
    add(
        "url pg_dump",
        "pg_dump postgresql://reporter:{S}@analytics.db:5432/events > dump.sql",
        password(),
    )
    add("openai quoted export", "export OPENAI_API_KEY='{S}'", "sk-proj-" + rand(URLSAFE, 48))
    add("stripe in code", "client = Stripe('{S}')", "sk_live_" + rand(ALNUM, 24))
    add("rails secret_key_base", "heroku config:set SECRET_KEY_BASE={S}", hexs(128))
    add("env DB_PASS quoted", 'DB_PASS="{S}"', password())
    add("env lower password", "password={S}", password())
    add("url mongodb plain", "mongodb://admin:{S}@mongo:27017", password())
    add("docker -e", "docker run -e POSTGRES_PASSWORD={S} postgres:16", password())
    add("query token hex", "token={S}", hexs(32))
    add("js apiKey env", "apiKey={S}", rand(ALNUM, 24))
    add("header token scheme", "'Authorization': 'Token {S}'", hexs(40))
    add("yaml flow mapping", "credentials: {user: ci, password: {S}}", password())
    return out


def negatives() -> list[dict[str, str]]:
    out: list[dict[str, str]] = []

    def add(form: str, *texts: str) -> None:
        out.extend({"form": form, "text": text} for text in texts)

    # identifiers and digests, generated ------------------------------------------------------
    for _ in range(15):
        add("commit hash", f"fixed in {hexs(40)}: the retry loop no longer spins")
    for _ in range(10):
        add("short commit", f"reverted {hexs(7)} and {hexs(9)} after the flaky test")
    for _ in range(15):
        add("uuid", f"request id {uuid.UUID(int=R.getrandbits(128), version=4)} failed with 502")
    for _ in range(10):
        add("sha256", f"sha256:{hashlib.sha256(R.randbytes(16)).hexdigest()}  dist/app.tar.gz")
    for _ in range(8):
        add("docker digest", f"pin the image to python@sha256:{hexs(64)}")
    for _ in range(8):
        data = base64.b64encode(R.randbytes(R.randint(12, 48))).decode()
        add("base64 test data", f'assert decode("{data}") == expected_bytes')
    for _ in range(6):
        add(
            "ulid",
            f"event {''.join(R.choice('0123456789ABCDEFGHJKMNPQRSTVWXYZ') for _ in range(26))}"
            " was written twice",
        )
    for _ in range(6):
        add("sri hash", f'<script src="/app.js" integrity="sha384-{rand(B64, 64)}"></script>')
    for _ in range(5):
        add(
            "npm lock integrity",
            f'"integrity": "sha512-{base64.b64encode(R.randbytes(64)).decode()}"',
        )
    for _ in range(5):
        add("git object", f"git cat-file -p {hexs(40)} shows the old tree")
    for _ in range(5):
        add("mongo object id", f"order {hexs(24)} is stuck in pending")
    for _ in range(5):
        add("colour", f"button background #{hexs(6)} and border #{hexs(3)}")
    for _ in range(5):
        add(
            "long identifier",
            "renamed "
            + "_".join(
                R.choice(
                    [
                        "user",
                        "account",
                        "billing",
                        "invoice",
                        "retry",
                        "handler",
                        "factory",
                        "config",
                        "token",
                        "password",
                        "reset",
                        "validator",
                        "secret",
                        "manager",
                    ]
                )
                for _ in range(5)
            )
            + " to something shorter",
        )
    for _ in range(4):
        add("md5 etag", f'ETag: "{hexs(32)}" matched, so the CDN served the cached copy')
    for _ in range(4):
        add(
            "ip and port",
            f"api at 10.{R.randint(0, 255)}.{R.randint(0, 255)}.{R.randint(1, 254)}:"
            f"{R.randint(1024, 65535)} answers slowly",
        )

    # hand-written: what coding agents write -----------------------------------------------------
    add(
        "prose about passwords",
        "the password field is validated with zod",
        "rotate the DB password monthly",
        "PASSWORD is read from the vault at start-up",
        "password reset emails were going to spam; fixed the SPF record",
        "users can change their password from the settings page",
        "the password hash uses argon2id with 64 MiB memory",
        "never log the password, only whether it matched",
        "password: required, at least 12 characters (see the signup schema)",
        "the password is validated server-side as well",
        "Password must contain a digit; the test for that is test_password_needs_digit",
        "forgot-password flow: token expires after 30 minutes",
        "the secret is stored in AWS Secrets Manager under prod/api",
        "secret rotation runs every 90 days via the rotate-secrets lambda",
        "the token is refreshed five minutes before it expires",
        "token refresh failed because the clock on the runner was skewed",
        "API keys are scoped per project and can be revoked from the dashboard",
        "the API key goes in the X-Api-Key header, not in the query string",
        "credentials come from the instance profile, never from env vars",
        "Bearer authentication is used for the public API",
        "Bearer tokens expire after 3600 seconds",
        "authorization header missing -> 401, wrong scheme -> 400",
        "the auth token is cached in memory only",
        "secrets are injected by the CSI driver as files under /mnt/secrets",
        "private keys live in the HSM; the app only sees a key handle",
        "the JWT secret is loaded from JWT_SECRET at start-up",
        "the DB password comes from DB_PASSWORD, which CI sets from a masked variable",
        "check that the key starts with -----BEGIN OPENSSH PRIVATE KEY----- before parsing",
        "we use sk_live_ keys only in production; tests use sk_test_ keys",
        "GitHub tokens start with ghp_ or github_pat_; the scanner should know both",
        "the password is hashed",
        "the secret is rotated",
        "the token is 3600 seconds long-lived",
        "MySQL prompts for the password when you pass -p with a space",
        "pass the token with --token-file, not on the command line",
        "docker login --password-stdin reads it from stdin, so it never shows in ps",
        "curl -u reads the password interactively when you leave it out",
    )
    add(
        "env names and placeholders",
        "API_KEY=<your key>",
        "API_KEY=<your-api-key-here>",
        "DB_PASSWORD=${DB_PASSWORD}",
        "PASSWORD=$PASSWORD",
        "export GITHUB_TOKEN=$(gh auth token)",
        "OPENAI_API_KEY=sk-...",
        "OPENAI_API_KEY=your_openai_api_key",
        "PASSWORD=changeme",
        "SECRET_KEY=change-me",
        "API_KEY=xxxxxxxxxxxxxxxx",
        "PASSWORD=********",
        "TOKEN=***",
        "DB_PASSWORD=",
        'DB_PASSWORD=""',
        "API_KEY=dummy",
        "API_KEY=example",
        "STRIPE_SECRET_KEY=sk_test_placeholder",
        "JWT_SECRET=replace-with-a-long-random-string",
        "password: ${{ secrets.DB_PASSWORD }}",
        "token: ${{ secrets.GITHUB_TOKEN }}",
        "password: !ENV ${DB_PASSWORD}",
        "password: {{ .Values.db.password }}",
        'password: "{{ vault_db_password }}"',
        "PGPASSWORD=$DB_PASSWORD psql -h localhost -U app",
        'curl -H "Authorization: Bearer $TOKEN" https://api.acme.io/v2/me',
        "curl -H 'Authorization: Bearer ${API_TOKEN}' https://api.acme.io",
        "Authorization: Bearer <token>",
        "X-Api-Key: <api-key>",
        "docker login -u $DOCKER_USER -p $DOCKER_PASSWORD",
        'echo "$DOCKER_PASSWORD" | docker login -u ci --password-stdin',
        "mysql -u root -p app",
        "mysql -u root -p$MYSQL_ROOT_PASSWORD app",
        'sshpass -p "$SSHPASS" ssh deploy@host',
        "./manage.py createsuperuser --password=$ADMIN_PASSWORD",
        "postgres://user:password@localhost:5432/app",
        "postgres://postgres:postgres@localhost:5432/test",
        "postgres://app:${DB_PASSWORD}@db:5432/app",
        "redis://:${REDIS_PASSWORD}@cache:6379/0",
        "amqp://guest:guest@localhost:5672/",
        "https://user:<token>@github.com/acme/api.git",
        "https://api.weather.io/v1/forecast?city=Oslo&api_key=YOUR_API_KEY",
        "?access_token={access_token}",
        "set the API key with `engram config set`; the value is never printed",
        "API_KEY is required; the app exits with code 3 without it",
        "the .env.example lists DB_PASSWORD, API_KEY and JWT_SECRET without values",
        "password: null",
        "password: ~",
        "token: none",
        "secret: false",
        "AWS_SECRET_ACCESS_KEY=AWS_SECRET_ACCESS_KEY",
        "AWS_SECRET_ACCESS_KEY: ${AWS_SECRET_ACCESS_KEY}",
        'api_key = "<API_KEY>"',
        "PASSWORD=%DB_PASSWORD%",
        'token = "REDACTED"',
        "password=[REDACTED:password]",
        "client_secret: op://Engineering/google-oauth/client-secret",
        "db_password: vault:secret/data/db#password",
    )
    add(
        "code reading secrets",
        'api_key = os.environ["API_KEY"]',
        'password = os.getenv("DB_PASSWORD")',
        "const token = process.env.GITHUB_TOKEN;",
        "token = request.headers.get('Authorization', '').removeprefix('Bearer ')",
        "self.password = password",
        "password = args.password or getpass.getpass()",
        "password: string;",
        "password: z.string().min(12),",
        "password: str = Field(min_length=12)",
        "secret: SecretStr",
        "let token = await getToken(user);",
        "const { accessToken } = await refresh(session);",
        "accessToken: session.accessToken,",
        "if user.password == hashed: return True",
        "assert settings.SECRET_KEY, 'SECRET_KEY must be set'",
        "token = tokens[0]",
        "api_key = config.api_key",
        "password = password_input.value",
        "max_tokens: 4096",
        "max_tokens=1024, temperature=0.2",
        "token_type: bearer",
        "csrf_token = request.cookies.get('csrftoken')",
        "page_token = response.next_page_token",
        "TOKEN_URL = 'https://oauth2.googleapis.com/token'",
        "PASSWORD_MIN_LENGTH = 12",
        "SECRET_NAME = 'prod/api/db'",
        "API_KEY_HEADER = 'X-Api-Key'",
        "token_count = len(tokenizer.encode(text))",
        "def check_password(raw: str, hashed: bytes) -> bool:",
        "def test_password_reset_token_expires_after_30_minutes():",
        "def test_api_key_is_required(client):",
        "test_login_rejects_wrong_password PASSED",
        "tests/test_auth.py::test_token_refresh FAILED - assert 401 == 200",
        "with open(key_path) as f: private_key = serialization.load_pem_private_key(f.read(), None)",
        "ssh-keygen -t ed25519 -f ~/.ssh/deploy_key -N ''",
        "auth = HTTPBasicAuth(user, password)",
        "password=None",
        "password = ''",
        "if not api_key:\n    raise ValueError('API_KEY is not set')",
        "get_secret(name='db-password', version='latest')",
        "jwt.encode(payload, key, algorithm='HS256')",
        "passwd = pwd.getpwuid(os.getuid())",
        "cwd = os.getcwd()  # not $PWD",
        "OLDPWD=/home/dev/projects/api",
        "PWD=/home/dev/projects/api",
        "bypass: true",
        "compass = Compass(heading=270)",
        "keyboard_shortcut = 'ctrl+k'",
        "primary_key = 'id'",
        "cache_key = f'user:{user_id}:profile'",
        "sort_key: created_at",
        "secret_ref: db-credentials",
        "token_ttl: 3600",
        "password_hash = bcrypt.hashpw(raw, bcrypt.gensalt())",
        "api_key_id = 42",
        "TokenType.BEARER",
        "class PasswordValidator(BaseValidator):",
        "export function useAuthToken(): string | null {",
        "let secret = crypto.randomBytes(32).toString('hex');",
        "const apiKey = useApiKey();",
        "password: hashPassword(input.password),",
        "secret = secrets.token_urlsafe(32)",
        "token = jwt.encode({'sub': user.id}, settings.SECRET_KEY)",
        "Authorization: Bearer ${token}",
        "headers['Authorization'] = f'Bearer {token}'",
        "X-Api-Key: ${{ secrets.API_KEY }}",
        '--token "$GH_TOKEN"',
        "gh auth login --with-token < token.txt",
    )
    add(
        "paths and urls",
        "engram/secrets.py: the scanner runs before every write",
        "see src/auth/password_reset.ts line 88",
        "config lives in ~/.config/acme/credentials.toml (read-only)",
        "the fixture is tests/fixtures/secrets/empty.env",
        "/var/run/secrets/kubernetes.io/serviceaccount/token is mounted read-only",
        "https://github.com/acme/api/pull/1423",
        "https://docs.github.com/en/authentication/keeping-your-account-and-data-secure",
        "git@github.com:acme/api.git",
        "ssh://git@gitlab.acme.io:2222/platform/infra.git",
        "https://api.acme.io/v1/users?page=2&per_page=50&sort=created_at",
        "https://www.google.com/search?q=token+bucket+rate+limiter",
        "http://localhost:8080/health returns 200",
        "redis://cache.internal:6379/0",
        "postgres://db.internal:5432/app (credentials from the pgpass file)",
        "https://registry.npmjs.org/@acme%2fui/-/ui-2.3.1.tgz",
        "https://pypi.org/project/detect-secrets/1.5.0/",
        "https://hooks.slack.com/services is where the webhook URL points; value in the vault",
        "file:///home/dev/project/README.md",
        "C:\\Users\\dev\\AppData\\Roaming\\npm\\node_modules",
        "docs/reliability.md#secret-scanning",
        "https://user@bitbucket.org/acme/repo.git",
        "mailto:security@acme.io",
        "s3://acme-artifacts/builds/2026-04-15/app.tar.gz",
        "gs://acme-models/embeddings/v3/index.bin",
        "arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod/db-AbCdEf",
        "arn:aws:iam::123456789012:role/deploy",
    )
    add(
        "versions and numbers",
        "upgraded pydantic from 2.6.4 to 2.7.1",
        "node v20.11.1, npm 10.2.4, pnpm 8.15.4",
        "python 3.12.2 (main, Feb  6 2024) [GCC 13.2.0]",
        "bumped the chart to 1.4.0-rc.2+build.117",
        "go 1.22.1 linux/amd64",
        "the build took 3m41s; cache hit rate 87%",
        "listening on 0.0.0.0:8000, 4 workers",
        "postgres 16.2 on port 5432, pgbouncer on 6432",
        "timeout=30s retries=3 backoff=2.0",
        "memory limit 512Mi, cpu 250m",
        "p95 latency dropped from 420 ms to 180 ms",
        "TLS 1.3 with TLS_AES_256_GCM_SHA384",
        "Exit code 137 (OOM killed) on the arm64 runner",
        "ubuntu-22.04, kernel 6.5.0-1017-azure",
        "requests==2.31.0 ; python_version >= '3.8'",
        "@types/node@20.11.30",
        "image: ghcr.io/acme/api:2026.04.15-3f9a2c1",
        "semver ^4.17.21 resolves to 4.17.21",
        "CVE-2024-3094 does not affect us (xz 5.4.5)",
        "ISO timestamp 2026-04-15T09:30:12.345Z",
    )
    add(
        "everyday notes",
        "the flaky test was a race between the writer and the reader; added a lock",
        "tantivy's query parser chokes on unbalanced quotes; we escape them now",
        "decided to keep JSONL over SQLite for the event log because git merges it cleanly",
        "migration 0042 adds a NOT NULL column with a default, so it is safe online",
        "the CI cache key includes the lockfile hash, so dependency bumps rebuild",
        "handoff: refactor of the billing worker is half done; tests for refunds still red",
        "next: wire the rate limiter into the gateway and load-test at 2k rps",
        "blocked on the staging cluster being down (ticket OPS-1182)",
        "must not redo: the index migration already ran on prod",
        "the CSV export streams rows instead of building a list; memory flat at 60 MB",
        "renamed UserSessionTokenFactory to SessionFactory",
        "the retry decorator uses exponential backoff with full jitter",
        "grep -rn 'TODO(security)' src/ found 4 places",
        "kubectl rollout restart deploy/api -n prod fixed the stale config",
        "docker compose up -d db redis && make test",
        "git rebase -i HEAD~3 and squash the fixups",
        "pytest -k 'not slow' -x -q passes locally, fails on CI with 3.11",
        "the lint rule S105 flags hard-coded passwords; it was a false positive on PASSWORD_FIELD",
        "we moved the secrets out of values.yaml into sealed secrets",
        "OAuth callback: the state parameter is checked against the session",
        "the webhook signature is an HMAC-SHA256 of the raw body with the shared secret",
        "login is rate limited to 5 attempts per minute per IP",
        "SSO via SAML for enterprise customers, OIDC for everyone else",
        "the session cookie is HttpOnly, Secure, SameSite=Lax",
        "token bucket with capacity 100 and refill 10/s",
        "tokenizer splits on whitespace and punctuation; CJK text gets bigrams",
        "the LLM call is capped at 2k tokens; longer prompts are truncated",
        "passwords are compared with hmac.compare_digest to avoid timing leaks",
        "the key rotation script re-encrypts every row with the new data key",
        "the user's API key is shown once at creation, then only its last four characters",
        "Basic auth is disabled on the admin panel now; SSO only",
        "we pin actions by commit SHA, e.g. actions/checkout@b4ffde65f46336ab88eb53be808477a3936bae11",
        "the JWT's exp claim is checked with 30 s leeway",
        'eyJ is the base64 of {" which is how you spot a JWT',
        "AKIA prefixes mark long-lived AWS access keys, ASIA temporary ones",
        "fixed: the `secret` flag on the field was ignored by the serializer",
        "token.type == TokenType.IDENT in the lexer",
        "the parser returns Token(kind='string', value='password')",
        "the regex ^[A-Za-z0-9_]{36}$ matched the old token shape",
        "Warning: Permanently added 'github.com' (ED25519) to the list of known hosts.",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl ci@acme",
        "the public key fingerprint is SHA256:+DiY3wvvV6TuJJhbpZisF/zLDA0zPMSvHdkr4UvCOqU",
        "-----BEGIN PUBLIC KEY----- blocks are fine to commit",
        "-----BEGIN CERTIFICATE----- goes in the CA bundle, not the key file",
        "The access key for the bucket is managed by Terraform (aws_iam_access_key.deploy)",
        "use `aws sts get-session-token` to get temporary credentials",
        "OPENAI_API_KEY and ANTHROPIC_API_KEY must both be set for the eval job",
        "the secret scanner refused 'PASSWORD=hunter' style lines; see the placeholder policy",
        "pnpm install --frozen-lockfile",
        "curl -sSf https://sh.rustup.rs | sh -s -- -y",
        "curl -u reads user:password; we use a netrc file instead",
        "psql -h localhost -U postgres -d app -c 'select 1'",
        "mysql --defaults-extra-file=~/.my.cnf app",
        "ssh -i ~/.ssh/id_ed25519 deploy@10.0.3.7",
        "redis-cli -h cache ping",
        "docker run -u 1000:1000 -v $PWD:/work ghcr.io/acme/tools:3",
        "chown 1000:1000 /data && chmod 600 /data/key.pem",
        "The secret to fast tests is not touching the disk",
        "the key insight: the index is derived, so we can always rebuild it",
        "a password manager entry named 'staging db' holds it",
        "CSS: .btn-primary { color: #0d6efd; border-radius: .375rem; }",
        "grid-template-columns: repeat(auto-fill, minmax(240px, 1fr));",
        "font-family: 'Inter', system-ui, -apple-system, sans-serif;",
        "SELECT id, email FROM users WHERE password_reset_at > now() - interval '1 day';",
        "UPDATE users SET password_hash = $1 WHERE id = $2",
        "ALTER TABLE api_keys ADD COLUMN last_used_at timestamptz;",
        "the api_keys table stores only a sha256 of each key",
        "feature flag new_checkout is at 25% in eu-west-1",
        "hostnames: api-1.prod.acme.internal, api-2.prod.acme.internal",
        "the k8s secret is named db-credentials and has keys username and password",
        "sealed-secrets controller v0.26.1 in kube-system",
        "vault kv get -field=password secret/app/db",
        "aws secretsmanager get-secret-value --secret-id prod/db --query SecretString",
        "gcloud secrets versions access latest --secret=api-key",
        "op read op://Engineering/staging-db/password",
        "kubectl get secret db -o jsonpath='{.data.password}' | base64 -d",
        "the Authorization header is forwarded by the proxy only to /api",
        "Set-Cookie: theme=dark; Path=/; Max-Age=31536000",
        "Content-Type: application/json; charset=utf-8",
        "X-Request-Id: 5f0c2a9e-8d1b-4c3a-9e7f-2b6d4a1c8e90",
        "Accept: application/vnd.github+json",
        "User-Agent: engram/0.9.0 (+https://github.com/acme/engram)",
        'WWW-Authenticate: Bearer realm="api", error="invalid_token"',
        "password reset links now expire after 1 hour",
        "set DB_PASSWORD in the CI secrets, never in .env.example",
        "token: ${TOKEN}",
        "password: <%= ENV['DB_PASSWORD'] %>",
        "secret_key_base: <%= Rails.application.credentials.secret_key_base %>",
        "export API_KEY=$(security find-generic-password -s api -w)",
        "password = hash_password(form.password.data)",
        "const secret = process.env.JWT_SECRET ?? '';",
        "if token is None: raise AuthError()",
        "token = None",
        'password: ""',
        "the auth token is 32 hex characters",
        "TOKEN_EXPIRY=3600",
        "api_key: str | None = None",
        "secret=os.urandom(32)",
        "github token scopes: repo, workflow, read:org",
        "keys: [id, name, password_hash]",
        "access_token, refresh_token = tokens",
        "password=password",
        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY come from OIDC",
        "Use `--password-file` instead of `--password`",
        "token = self._token",
        "session.headers['Authorization'] = 'Bearer ' + token",
        "the secret sauce is caching",
        "monkeypatch.setenv('API_KEY', 'test-key')",
        "assert resp.json()['token'] == token",
        "$ export PGPASSWORD  # reads it from .pgpass",
        "mysql -u root -p < dump.sql",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY (the AWS docs' example)",
    )
    return out


# -- forms found after the first version, in their own stream so the lines above stay as they were


def later_positives() -> list[dict[str, str]]:
    """Secret forms an adversarial test found missed (30), the rule set was tuned on these."""
    out: list[dict[str, str]] = []

    def add(form: str, template: str, secret: str) -> None:
        out.append({"form": form, "text": template.replace("{S}", secret), "secret": secret})

    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    def discord_bot() -> str:
        user = base64.b64encode(str(R.randint(10**17, 10**18)).encode()).decode().rstrip("=")
        return f"{user}.{rand(URLSAFE, 6)}.{rand(URLSAFE, 38)}"

    def ppk(private_lines: int) -> tuple[str, str]:
        private = "\n".join(rand(B64, 64) for _ in range(private_lines))
        text = (
            "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: deploy@ci\n"
            "Public-Lines: 2\n" + rand(B64, 64) + "\n" + rand(B64, 20) + "\n"
            f"Private-Lines: {private_lines}\n{{S}}\nPrivate-MAC: {hexs(64)}"
        )
        return text, private

    add(
        "gcp service account private_key_id",
        '{"type": "service_account", "project_id": "acme-prod", "private_key_id": "{S}", '
        '"client_email": "ci@acme-prod.iam.gserviceaccount.com"}',
        hexs(40),
    )
    add("gcp private_key_id terraform", 'private_key_id = "{S}"', hexs(40))
    add(
        "azure storage key cli json",
        '[\n  {\n    "creationTime": "2026-03-02T10:11:12+00:00",\n'
        '    "keyName": "key1",\n    "permissions": "FULL",\n    "value": "{S}"\n  }\n]',
        rand(B64, 86) + "==",
    )
    add("azure storage key env", "AZURE_STORAGE_KEY={S}", rand(B64, 86) + "==")
    add("discord bot token", 'bot.run("{S}")', discord_bot())
    add("discord bot token env", "DISCORD_BOT_TOKEN={S}", discord_bot())
    add(
        "discord webhook",
        f"alerts go to https://discord.com/api/webhooks/{R.randint(10**17, 10**18)}/{{S}}",
        rand(URLSAFE, 68),
    )
    add(
        "discord webhook legacy host",
        f"curl -X POST https://discordapp.com/api/webhooks/"
        f"{R.randint(10**17, 10**18)}/{{S}} -d @msg.json",
        rand(URLSAFE, 68),
    )
    text, secret = ppk(1)
    add("putty ppk", text, secret)
    text, secret = ppk(4)
    add("putty ppk several private lines", text, secret)
    add(
        "jwt.encode literal",
        'token = jwt.encode({"sub": user.id}, "{S}", algorithm="HS256")',
        machine_password(32),
    )
    add(
        "jwt.sign literal",
        "const token = jwt.sign(payload, '{S}', { expiresIn: '1h' });",
        rand(ALNUM, 32),
    )
    add(
        "netrc multi-line",
        "machine api.heroku.com\n  login ops@acme.io\n  password {S}\n",
        str(uuid.UUID(int=R.getrandbits(128))),
    )
    add("netrc default", "default login anonymous password {S}", password())
    add("vault s. token", "vault login {S}", "s." + rand(ALNUM, 24))
    add("vault s. token env", 'export VAULT_TOKEN="{S}"', "s." + rand(ALNUM, 24))
    add(
        "kubeconfig client-key-data",
        "users:\n- name: admin\n  user:\n    client-key-data: {S}",
        b64(pem("RSA ", 3) + "\n"),
    )
    add("kubeconfig user token", "users:\n- name: ci\n  user:\n    token: {S}", rand(ALNUM, 64))
    add(
        "docker config auth",
        '{"auths": {"registry.acme.io": {"auth": "{S}"}}}',
        b64(f"bot:{machine_password(24)}"),
    )
    add(
        "docker config auth docker hub",
        '{\n  "auths": {\n    "https://index.docker.io/v1/": {\n      "auth": "{S}"\n    }\n  }\n}',
        b64(f"acme:{password()}"),
    )
    add(
        "npmrc _auth",
        "registry=https://npm.acme.io/\n_auth={S}\nalways-auth=true",
        b64(f"ci:{password()}"),
    )
    add(
        "npmrc scoped _password",
        "//npm.acme.io/:username=ci\n//npm.acme.io/:_password={S}",
        b64(password()),
    )
    add(
        "okta ssws",
        'curl -H "Authorization: SSWS {S}" https://acme.okta.com/api/v1/users',
        "00" + rand(URLSAFE, 40),
    )
    add("okta ssws header", "Authorization: SSWS {S}", "00" + rand(URLSAFE, 40))
    add(
        "atlassian api token",
        "jira api token {S}",
        "ATATT3xFfGF0" + rand(URLSAFE, 171) + "=" + hexs(8).upper(),
    )
    add("linear api key", "linear client uses {S}", "lin_api_" + rand(ALNUM, 40))
    add("linear api key header", "Authorization: {S}", "lin_api_" + rand(ALNUM, 40))
    add(
        "grafana service account token",
        "grafana token {S} for the dashboards sync",
        "glsa_" + rand(ALNUM, 32) + "_" + hexs(8),
    )
    add("postman api key", "postman collection run with {S}", "PMAK-" + hexs(24) + "-" + hexs(34))
    add("postman api key env", "POSTMAN_API_KEY={S}", "PMAK-" + hexs(24) + "-" + hexs(34))
    return out


def later_negatives() -> list[dict[str, str]]:
    """Look-alikes of the forms above (30): must be stored as they are."""
    out: list[dict[str, str]] = []

    def add(form: str, *texts: str) -> None:
        out.extend({"form": form, "text": text} for text in texts)

    add(
        "look-alikes of later forms",
        "the private_key_id field names the key; the key itself is in private_key",
        '"private_key_id": ""',
        'az storage account keys list --account-name stapp --query "[0].keyName"',
        '{"keyName": "key1", "permissions": "FULL"}',
        f'"value": "{rand(ALNUM, 12)}", "name": "feature-flags"',
        "client.run(TOKEN)",
        "https://discord.com/developers/applications",
        "puttygen deploy.ppk -O public-openssh -o deploy.pub",
        "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: aes256-cbc\nComment: deploy",
        'jwt.encode(payload, settings.JWT_SECRET, algorithm="HS256")',
        'jwt.encode(payload, key=private_key, algorithm="RS256")',
        "const token = jwt.sign(payload, process.env.JWT_SECRET);",
        "machine github.com\n  login alice",
        "machine api.acme.io login bot password ${NETRC_PASSWORD}",
        "defer s.Close()",
        "log.Fatal(s.ListenAndServe())",
        "s.mu.Lock(); defer s.mu.Unlock()",
        "vault token lookup -format=json | jq .data.policies",
        "client-key-data: DATA+OMITTED",
        "client-certificate-data: DATA+OMITTED",
        '{"auths": {"https://index.docker.io/v1/": {}}, "credsStore": "osxkeychain"}',
        '"credHelpers": {"gcr.io": "gcloud", "public.ecr.aws": "ecr-login"}',
        "_auth=${NPM_AUTH}",
        "email=dev@acme.io\nregistry=https://registry.npmjs.org/",
        "okta login --org https://acme.okta.com",
        "Authorization: SSWS $OKTA_TOKEN",
        "API tokens are made at https://id.atlassian.com/manage-profile/security/api-tokens",
        "LIN-4821 tracks the flaky upload test",
        'pm.environment.get("api_key")',
        f"cache key {hexs(32)} missed, so the build ran cold",
    )
    return out


def build() -> dict[str, str]:
    """The corpus files' names and contents."""
    R.seed(SEED)
    files = {}
    first_positives, first_negatives = positives(), negatives()
    for name, rows in (
        ("secrets_positive.jsonl", first_positives + later_positives()),
        ("secrets_negative.jsonl", first_negatives + later_negatives()),
    ):
        files[name] = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    return files


def main() -> None:
    for name, text in build().items():
        (HERE / name).write_text(text, encoding="utf-8")
        print(f"{name}: {text.count(chr(10))} texts")


if __name__ == "__main__":
    main()
