"""Write the secret scanner's held-out corpora: secrets_heldout_positive.jsonl and
secrets_heldout_negative.jsonl.

    .venv/bin/python tests/corpus/make_secrets_heldout.py

These forms were written before the scanner was built on the maintained rule set, and measured
once, untouched, with the scanner as it was then tuned on the other corpora (commit 939d79d):
40 of 72 caught (55.6%), 3 of 132 look-alikes refused (2.27%), as docs/reliability.md reports.
After that they became tuning forms: the scanner was fixed for what it missed here, after a
second held-out corpus (make_secrets_heldout2.py) had been written and committed, so that one
still measures text the scanner was not shaped on. Keep this file as it was written.

Lines have the same shape as the tuned corpora (make_secrets_corpus.py): a positive line is
{"form", "text", "secret"}, with the exact part of the text that is the credential; a negative
line is {"form", "text"}, a look-alike that must be stored as it is. Every value is made up here
from a fixed seed: correctly shaped, random characters, never a real credential.
"""

from __future__ import annotations

import base64
import json
import random
import string
import uuid
from pathlib import Path

HERE = Path(__file__).parent
SEED = 20261104
R = random.Random(SEED)

ALNUM = string.ascii_letters + string.digits
LOWER_ALNUM = string.ascii_lowercase + string.digits
UPPER_ALNUM = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
URLSAFE = ALNUM + "-_"
B64 = ALNUM + "+/"


def rand(alphabet: str, n: int) -> str:
    """Random characters, with each of upper case, lower case and digits that the alphabet has."""
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
        "Heron",
        "glacier",
        "Ostrich",
        "pepper",
        "Lantern",
        "meadow",
        "Granite",
        "saffron",
        "Walnut",
        "thistle",
        "Beacon",
        "marlin",
    ]
    parts = [R.choice(words), str(R.randint(10, 9999)), R.choice("!#%*+-_.@^")]
    R.shuffle(parts)
    return "".join(parts) + rand(ALNUM, 3)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def positives() -> list[dict[str, str]]:
    out: list[dict[str, str]] = []

    def add(form: str, template: str, secret: str) -> None:
        out.append({"form": form, "text": template.replace("{S}", secret), "secret": secret})

    # -- provider tokens, in prose or under a key that says nothing ----------------------------
    sentry_payload = b64url(
        json.dumps(
            {
                "iat": R.randint(1_700_000_000, 1_800_000_000),
                "url": "https://sentry.io",
                "org": "acme",
            }
        ).encode()
    )
    add(
        "sentry org token",
        "SENTRY_AUTH_TOKEN={S} sentry-cli releases new 1.4.0",
        f"sntrys_{sentry_payload}_{rand(URLSAFE, 43)}",
    )
    add(
        "sentry user token",
        "sentry-cli was set up with {S} by the release job",
        "sntryu_" + hexs(64),
    )
    add("heroku api key", "heroku authorizations:create printed {S}", "HRKU-AA" + rand(URLSAFE, 58))
    add("cloudflare api token env", "CLOUDFLARE_API_TOKEN={S} wrangler deploy", rand(URLSAFE, 40))
    add(
        "cloudflare global key header",
        "curl -H 'X-Auth-Email: ops@acme.io' -H 'X-Auth-Key: {S}' "
        "https://api.cloudflare.com/client/v4/zones",
        hexs(37),
    )
    add("fly.io token", "flyctl tokens create deploy gave {S}", "fo1_" + rand(URLSAFE, 43))
    add("supabase access token", "supabase login --token {S}", "sbp_" + hexs(40))
    add(
        "supabase service role jwt",
        "SUPABASE_SERVICE_ROLE_KEY={S}",
        b64url(b'{"alg":"HS256","typ":"JWT"}')
        + "."
        + b64url(b'{"iss":"supabase","ref":"xyzabcdefghi","role":"service_role","iat":1700000000}')
        + "."
        + rand(URLSAFE, 43),
    )
    add(
        "doppler service token",
        "the service token {S} reads the prd config",
        "dp.st.prd." + rand(ALNUM, 43),
    )
    add("pulumi token", "pulumi login with {S} on the runner", "pul-" + hexs(40))
    add(
        "planetscale token",
        "pscale auth token for the CI is {S}",
        "pscale_tkn_" + rand(URLSAFE, 43),
    )
    add(
        "planetscale password url",
        "DATABASE_URL=mysql://app:{S}@aws.connect.psdb.cloud/shop",
        "pscale_pw_" + rand(URLSAFE, 43),
    )
    add(
        "new relic user key",
        "New Relic user key {S} for the dashboards",
        "NRAK-" + rand(UPPER_ALNUM, 27),
    )
    add("sourcegraph token", "src login https://sourcegraph.acme.io with {S}", "sgp_" + hexs(40))
    add("airtable pat", "airtable base sync uses {S}", "pat" + rand(ALNUM, 14) + "." + hexs(64))
    add(
        "notion integration secret",
        "the Notion integration secret {S} can read the wiki",
        "ntn_" + rand(ALNUM, 46),
    )
    add(
        "mapbox secret token",
        "mapbox downloads token {S}",
        "sk."
        + b64url(b'{"u":"acme","a":"' + rand(LOWER_ALNUM, 25).encode() + b'"}')
        + "."
        + rand(URLSAFE, 22),
    )
    add(
        "dropbox short-lived token",
        "dropbox returned {S} for the upload",
        "sl." + rand(URLSAFE, 135),
    )
    add("replicate token", "replicate.run(model) with {S}", "r8_" + rand(ALNUM, 37))
    add("groq key", "groq key {S} for the fast eval", "gsk_" + rand(ALNUM, 52))
    add("perplexity key", "perplexity search uses {S}", "pplx-" + rand(ALNUM, 48))
    add("xai key", "grok calls go out with {S}", "xai-" + rand(ALNUM, 80))
    add(
        "tailscale auth key",
        "tailscale up --authkey {S} --hostname ci-7",
        f"tskey-auth-k{rand(ALNUM, 16)}-{rand(ALNUM, 32)}",
    )
    add("buildkite token", "buildkite agent API token {S}", "bkua_" + hexs(40))
    add("sonarqube token", "the analysis runs with {S}", "squ_" + hexs(40))
    add(
        "fcm server key",
        "FCM server key {S} for push",
        "AAAA" + rand(URLSAFE, 7) + ":APA91b" + rand(URLSAFE, 134),
    )
    add("mailgun key", "mailgun private key {S}", "key-" + hexs(32))
    add(
        "nuget key",
        "dotnet nuget push bin/Acme.1.4.0.nupkg -k {S} -s https://api.nuget.org/v3/index.json",
        "oy2" + rand(LOWER_ALNUM, 43),
    )
    add("rubygems credentials", "---\n:rubygems_api_key: {S}", "rubygems_" + hexs(48))
    add("crates.io token", "cargo login {S}", "cio" + rand(ALNUM, 32))
    add("circleci pat", "circleci API token {S}", "CCIPAT_" + rand(ALNUM, 22) + "_" + hexs(40))
    add(
        "microsoft teams webhook",
        "alerts post to {S}",
        f"https://acme.webhook.office.com/webhookb2/{uuid.UUID(int=R.getrandbits(128))}"
        f"@{uuid.UUID(int=R.getrandbits(128))}/IncomingWebhook/{hexs(32)}/"
        f"{uuid.UUID(int=R.getrandbits(128))}",
    )
    add("netlify token", "netlify deploy used {S}", "nfp_" + rand(ALNUM, 36))
    add(
        "grafana cloud token",
        "grafana cloud access policy token {S}",
        "glc_"
        + b64url(
            json.dumps(
                {"o": str(R.randint(10**5, 10**6)), "n": "ci", "k": rand(ALNUM, 24)}
            ).encode()
        ),
    )
    add("contentful pat", "contentful management token {S}", "CFPAT-" + rand(URLSAFE, 43))
    add(
        "asana pat",
        "asana PAT {S}",
        f"2/{R.randint(10**15, 10**16)}/{R.randint(10**15, 10**16)}:" + hexs(32),
    )
    add(
        "braintree token",
        "braintree access token {S}",
        f"access_token$production${rand(LOWER_ALNUM, 16)}${hexs(32)}",
    )
    add("alibaba access key id", "aliyun access key {S}", "LTAI" + rand(ALNUM, 20))
    add("facebook token", "the graph API call used {S}", "EAAG" + rand(ALNUM, 180))
    add(
        "twitter bearer",
        "Twitter bearer token {S}",
        "AAAAAAAAAAAAAAAAAAAAA"
        + rand(ALNUM, 30)
        + "%2F"
        + rand(ALNUM, 12)
        + "%3D"
        + rand(ALNUM, 40),
    )

    # -- keys and assignments in files people paste -----------------------------------------
    add("azure devops pat", "export AZURE_DEVOPS_EXT_PAT={S}", rand(LOWER_ALNUM, 52))
    add(
        "azure sp json",
        '{"appId": "' + str(uuid.UUID(int=R.getrandbits(128))) + '", '
        '"displayName": "ci", "password": "{S}", "tenant": "'
        + str(uuid.UUID(int=R.getrandbits(128)))
        + '"}',
        rand(ALNUM, 3) + "8Q~" + rand(URLSAFE, 31),
    )
    add(
        "sql server connection string",
        '"DefaultConnection": "Server=tcp:acme.database.windows.net'
        ',1433;Database=app;User ID=sa;Password={S};Encrypt=True"',
        password(),
    )
    add("jdbc url", "jdbc:postgresql://db:5432/app?user=app&password={S}", password())
    add(
        "django secret key",
        "SECRET_KEY = '{S}'",
        "django-insecure-" + rand(LOWER_ALNUM + "!@#$%^&*-_=+", 50),
    )
    add(
        "wireguard private key",
        "[Interface]\nPrivateKey = {S}\nAddress = 10.8.0.2/24",
        base64.b64encode(R.randbytes(32)).decode(),
    )
    add(
        "openvpn static key",
        "tls-auth key:\n{S}",
        "-----BEGIN OpenVPN Static key V1-----\n"
        + "\n".join(hexs(32) for _ in range(16))
        + "\n-----END OpenVPN Static key V1-----",
    )
    add("wpa_supplicant psk", 'network={\n  ssid="acme-office"\n  psk="{S}"\n}', password())
    add(
        "git extraheader",
        'git -c http.extraheader="AUTHORIZATION: basic {S}" clone '
        "https://dev.azure.com/acme/_git/api",
        base64.b64encode(f":{rand(LOWER_ALNUM, 52)}".encode()).decode(),
    )
    add("rails master key", "RAILS_MASTER_KEY={S} bin/rails server", hexs(32))
    add(
        "gcloud refresh token",
        '{"refresh_token": "{S}", "type": "authorized_user"}',
        "1//0" + rand(URLSAFE, 99),
    )
    add(
        "ansible inventory",
        "web1 ansible_host=10.0.0.5 ansible_user=deploy ansible_become_pass={S}",
        password(),
    )
    add(
        "k8s secret data",
        "apiVersion: v1\nkind: Secret\ndata:\n  password: {S}",
        base64.b64encode(password().encode()).decode(),
    )
    add("helm values camel case", "postgresql:\n  auth:\n    postgresPassword: {S}", password())
    add("yarnrc token", 'npmAuthToken: "{S}"', str(uuid.UUID(int=R.getrandbits(128))))
    add(
        "boto3 literal",
        'boto3.client("s3", aws_access_key_id=key_id, aws_secret_access_key="{S}")',
        rand(B64, 40),
    )
    add("sts json session token", '"SessionToken": "{S}",', "IQoJb3JpZ2luX2Vj" + rand(B64, 200))
    add("libpq conninfo", 'psql "host=db.internal user=app password={S} dbname=app"', password())
    add("vercel --token", "vercel deploy --prod --token {S}", rand(ALNUM, 24))

    # -- forms without a key that names a credential ---------------------------------------
    add("wp-config define", "define( 'DB_PASSWORD', '{S}' );", password())
    add(
        "gradle signing",
        "signingConfigs {\n  release {\n    storePassword '{S}'\n  }\n}",
        password(),
    )
    add("redis requirepass", "requirepass {S}", rand(ALNUM, 32))
    add("mysql identified by", "CREATE USER 'app'@'%' IDENTIFIED BY '{S}';", password())
    add("postgres with password", "ALTER USER app WITH PASSWORD '{S}';", password())
    add("pgpass line", "db.internal:5432:app:app:{S}", password())
    add("smbclient", "smbclient //fs01/share -U alice%{S}", password())
    add(
        "ngrok authtoken",
        "ngrok config add-authtoken {S}",
        "2" + rand(ALNUM, 26) + "_" + rand(ALNUM, 21),
    )
    add("cohere client literal", 'co = cohere.Client("{S}")', rand(ALNUM, 40))
    add("requests basic auth", 'requests.get(url, auth=("admin", "{S}"))', password())
    add(
        "echo to docker login",
        'echo "{S}" | docker login -u bot --password-stdin ghcr.io',
        rand(ALNUM, 24),
    )
    add("django session cookie", "Cookie: sessionid={S}; csrftoken=abc", rand(LOWER_ALNUM, 32))
    add("datadog app key prose", "Datadog application key {S}", hexs(40))
    return out


def negatives() -> list[dict[str, str]]:
    out: list[dict[str, str]] = []

    def add(form: str, *texts: str) -> None:
        out.extend({"form": form, "text": text} for text in texts)

    add(
        "public by design",
        f"STRIPE_PUBLISHABLE_KEY=pk_live_{rand(ALNUM, 24)}",
        f"const stripe = Stripe('pk_test_{rand(ALNUM, 24)}');",
        f"GOOGLE_CLIENT_ID={R.randint(10**11, 10**12)}-{rand(LOWER_ALNUM, 32)}.apps.googleusercontent.com",
        f"SENTRY_DSN=https://{hexs(32)}@o{R.randint(10**5, 10**6)}.ingest.sentry.io/{R.randint(10**6, 10**7)}",
        f"ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABgQ{rand(B64, 120)} deploy@ci",
        "-----BEGIN CERTIFICATE-----\n"
        + "\n".join(rand(B64, 64) for _ in range(4))
        + "\n-----END CERTIFICATE-----",
        "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n"
        + "\n".join(rand(B64, 64) for _ in range(3))
        + "\n-----END PGP PUBLIC KEY BLOCK-----",
        '---- BEGIN SSH2 PUBLIC KEY ----\nComment: "rsa-key-20260101"\n'
        + "\n".join(rand(B64, 64) for _ in range(3))
        + "\n---- END SSH2 PUBLIC KEY ----",
        f"certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t{rand(B64, 80)}",
        f"client-certificate-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t{rand(B64, 80)}",
        f"account SID AC{hexs(32)} is in the Twilio console header",
        f"org id org-{rand(ALNUM, 24)} owns the fine-tuned models",
        f"bc1q{rand(LOWER_ALNUM, 38)} is the donation address",
        f"0x{hexs(40)} deployed the contract",
    )
    add(
        "lock files and digests",
        f"github.com/spf13/cobra v1.8.0 h1:{rand(B64, 43)}=",
        f'checksum = "{hexs(64)}"',
        f"    --hash=sha256:{hexs(64)}",
        f'resolved "https://registry.yarnpkg.com/ms/-/ms-2.1.3.tgz#{hexs(40)}"',
        f"REPOSITORY TAG DIGEST\nacme/api 1.4 sha256:{hexs(64)}",
        f"Change-Id: I{hexs(40)}",
        f"Reverts {hexs(40)}; see the thread",
        f"{hexs(64)}  app-1.4.0.tar.gz",
        f"/nix/store/{rand('0123456789abcdfghijklmnpqrsvwxyz', 32)}-python3-3.11.9",
        f"container {hexs(64)} exited with 137",
        f"magnet:?xt=urn:btih:{hexs(40)}&dn=ubuntu-24.04.iso",
        f"ipfs://bafybei{rand('abcdefghijklmnopqrstuvwxyz234567', 52)}",
        f"main.{hexs(8)}.js and vendor.{hexs(20)}.chunk.js are cached for a year",
    )
    add(
        "ids that look like tokens",
        f"customer cus_{rand(ALNUM, 14)} was charged twice",
        f"payment intent pi_{rand(ALNUM, 24)} is requires_action",
        f"price_{rand(ALNUM, 24)} is the monthly plan",
        f"the connected account acct_{rand(ALNUM, 16)} has payouts paused",
        f"evt_{rand(ALNUM, 24)} was delivered 3 times",
        f"chatcmpl-{rand(ALNUM, 29)} returned finish_reason=length",
        f"msg_01{rand(ALNUM, 22)} stopped at max_tokens",
        f"toolu_01{rand(ALNUM, 22)} failed: file not found",
        f"assistant asst_{rand(ALNUM, 24)} and thread thread_{rand(ALNUM, 24)}",
        f"GitHub node id MDQ6VXNlcj{rand(ALNUM, 6)}= and PR_kwDO{rand(URLSAFE, 20)}",
        f"deployment dpl_{rand(ALNUM, 28)} is ready",
        f"x-amz-request-id: {rand(UPPER_ALNUM, 16)}\nx-amz-id-2: {rand(B64, 76)}=",
        f"CloudFront distribution E{rand(UPPER_ALNUM, 13)} invalidated",
        f'uid: {uuid.UUID(int=R.getrandbits(128), version=4)}\nresourceVersion: "{R.randint(10**5, 10**7)}"',
        f"traceparent: 00-{hexs(32)}-{hexs(16)}-01",
        f"trace_id={hexs(32)} span_id={hexs(16)}",
        f"Discord user id {R.randint(10**17, 10**18)} and channel https://discord.com/channels/"
        f"{R.randint(10**17, 10**18)}/{R.randint(10**17, 10**18)}",
        f"join us at https://discord.gg/{rand(ALNUM, 8)}",
        f'ETag: "{hexs(32)}"',
        f"ami-{hexs(17)} in eu-west-1 and sg-{hexs(17)}",
    )
    add(
        "encoded data that is not a credential",
        f"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAA{rand(B64, 120)}=",
        f"//# sourceMappingURL=data:application/json;base64,eyJ2ZXJzaW9uIjozLCJzb3VyY2VzIjpb{rand(B64, 60)}",
        'eyJhbGciOiJIUzI1NiJ9 decodes to {"alg":"HS256"}, the JWT header',
        "a JWT looks like xxxxx.yyyyy.zzzzz: header, payload, signature",
    )
    add(
        "near a credential's name, without one",
        "//registry.npmjs.org/:_authToken=${NPM_TOKEN}",
        "always-auth=true",
        '{"auths": {"ghcr.io": {}}, "credsStore": "desktop"}',
        '"auth": ""',
        "machine github.com login x-access-token password $GH_TOKEN",
        'jwt.decode(token, os.environ["JWT_SECRET"], algorithms=["HS256"])',
        'bot.run(os.getenv("DISCORD_TOKEN"))',
        "discord.com/api/webhooks/{webhook.id}/{webhook.token}",
        "vault kv put secret/app password=@password.txt",
        "s.handleRequestWithContextDeadline(ctx, req)",
        "defer s.shutdownGracefullyWithTimeout(ctx)",
        "Authorization: SSWS {{apiKey}}",
        "Authorization: SSWS ${OKTA_API_TOKEN}",
        "Linear API keys start with lin_api_ and are made under Settings > API",
        "Grafana service account tokens start with glsa_",
        "Postman keys look like PMAK-<id>-<secret>",
        "ATATT3 is the prefix of Atlassian API tokens",
        '"private_key_id": "${GCP_PRIVATE_KEY_ID}"',
        "UseDevelopmentStorage=true",
        "DB_PASSWORD=\nAPI_KEY=\nJWT_SECRET=",
        "existingSecret: db-credentials",
        "passwordSecretRef:\n  name: pg-app\n  key: password",
        "secretName: tls-acme",
        "secrets:\n  - db_password",
        "password_file: /run/secrets/db_password",
        'token := os.Getenv("TOKEN")',
        'let api_key = std::env::var("API_KEY")?;',
        'String password = System.getenv("DB_PASSWORD");',
        'var secret = builder.Configuration["Jwt:Secret"];',
        'ENV.fetch("SECRET_KEY_BASE")',
        "config.secret_key_base = Rails.application.credentials.secret_key_base",
        'read -s -p "Password: " PASSWORD',
        "$cred = Get-Credential",
        "$password = Read-Host -AsSecureString",
        "db_password = <sensitive>",
        'password: "[hidden]"',
        'resource "random_password" "db" { length = 24 }',
        "password = random_password.db.result",
        "GITHUB_TOKEN: ${{ github.token }}",
        "NODE_AUTH_TOKEN: ${{ secrets.NPM_TOKEN }}",
        'echo "$DOCKER_PASSWORD" | docker login -u "$DOCKER_USERNAME" --password-stdin',
        'storePassword System.getenv("STORE_PASSWORD")',
        "# requirepass foobared",
        "IDENTIFIED BY '${MYSQL_PASSWORD}'",
        "password_hash: $2b$12$" + rand(ALNUM + "./", 53),
        "stored as $argon2id$v=19$m=65536,t=3,p=4$" + rand(B64, 22) + "$" + rand(B64, 43),
        'tokenizer: "cl100k_base"',
        "passphrase: ''",
        "token_endpoint: https://login.acme.io/oauth2/v1/token",
        "securitySchemes:\n  bearerAuth:\n    type: http\n    scheme: bearer\n    bearerFormat: JWT",
        "password_policy:\n  min_length: 12",
        "api_version: 2024-06-01",
    )
    add(
        "tool output",
        "Token: gho_************************************",
        "Token scopes: 'gist', 'read:org', 'repo'",
        "access_key     ****************ABCD shared-credentials-file",
        "WARNING! Your password will be stored unencrypted in /root/.docker/config.json.",
        "Login Succeeded",
        "Login failed for user 'sa'. Reason: Password did not match that for the login provided.",
        "host all all 0.0.0.0/0 scram-sha-256",
        "PasswordAuthentication no\nPermitRootLogin prohibit-password",
        "git config --global credential.helper osxkeychain",
        "openssl rand -hex 32 > .secrets/session_key",
        "htpasswd -c /etc/nginx/.htpasswd admin",
        "gh secret set NPM_TOKEN < token.txt",
        "kubectl create secret generic db --from-file=password=./db-password.txt",
        "aws ssm get-parameter --name /prod/db/password --with-decryption",
    )
    add(
        "code and prose",
        "useAuthenticatedSessionTokenRefreshEffect(session, { retry: 3 })",
        "class SecretRotationScheduler(BaseScheduler):",
        "def test_login_with_expired_password_token_redirects_to_reset():",
        "key: the index is derived, so losing it costs only time",
        "token budget: 8k for the prompt, 2k for the answer",
        "rotate the signing key every 90 days; the old one verifies for 7 more",
        "The API key is read from the keychain at start-up and never logged",
        "we dropped basic auth in favour of short-lived OIDC tokens",
        "if secret is None:\n    secret = load_secret(path)",
        "password_reset_token_ttl_minutes = 30",
        "grep -rn 'api_key' src/ | wc -l",
        "the secret manager's rotation lambda failed with AccessDenied",
        "PASS tests/auth.test.ts (3.2 s)",
        "passed: 412, failed: 0, skipped: 3",
        "Bypass the cache with ?nocache=1 during debugging",
    )
    return out


def build() -> dict[str, str]:
    """The held-out corpus files' names and contents."""
    R.seed(SEED)
    files = {}
    for name, rows in (
        ("secrets_heldout_positive.jsonl", positives()),
        ("secrets_heldout_negative.jsonl", negatives()),
    ):
        files[name] = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    return files


def main() -> None:
    for name, text in build().items():
        (HERE / name).write_text(text, encoding="utf-8")
        print(f"{name}: {text.count(chr(10))} texts")


if __name__ == "__main__":
    main()
