"""Write the second held-out secret corpus: secrets_heldout2_positive.jsonl and
secrets_heldout2_negative.jsonl.

    .venv/bin/python tests/corpus/make_secrets_heldout2.py

Written after the first held-out corpus (make_secrets_heldout.py) had been measured once and
before anything was changed because of what it missed: the scanner's fixes for the first
held-out corpus were made after this file was committed. It was measured once, untouched
(commit fd92db4): 54 of 62 caught (87.1%), 4 of 87 look-alikes refused (4.60%). After that it
became a tuning corpus, once a third one (make_secrets_heldout3.py) had been committed; the one
change since is the span of the private key in YAML, which now covers its BEGIN and END lines as
every other private key's does. Lines
have the shape of the other corpora; every value is made up from a fixed seed.
"""

from __future__ import annotations

import base64
import json
import random
import string
import uuid
from pathlib import Path

HERE = Path(__file__).parent
SEED = 20261202
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

    # -- assigned in env files, configs and code -------------------------------------------
    add("linode token env", "LINODE_TOKEN={S}", hexs(64))
    add("hcloud token env", "export HCLOUD_TOKEN={S}", rand(ALNUM, 64))
    add("scaleway secret key", "SCW_SECRET_KEY={S}", uid())
    add("railway token", "RAILWAY_TOKEN={S} railway up", uid())
    add("upstash rest token", 'UPSTASH_REDIS_REST_TOKEN="{S}"', "AX" + rand(URLSAFE, 58))
    add("algolia admin key", "ALGOLIA_ADMIN_KEY={S}", hexs(32))
    add("terraform cloud env", "TFE_TOKEN={S}", rand(ALNUM, 14) + ".atlasv1." + rand(ALNUM, 67))
    add("rabbitmq default pass", "RABBITMQ_DEFAULT_PASS={S}", password())
    add("elastic password", "ELASTIC_PASSWORD={S}", password())
    add("kibana yaml", 'elasticsearch.password: "{S}"', password())
    add("grafana admin password", "GF_SECURITY_ADMIN_PASSWORD={S}", password())
    add("minio root password", "MINIO_ROOT_PASSWORD={S}", rand(ALNUM, 24))
    add("consul token", "CONSUL_HTTP_TOKEN={S}", uid())
    add("pusher secret", "PUSHER_APP_SECRET={S}", hexs(20))
    add(
        "ably key",
        "ABLY_API_KEY={S}",
        rand(ALNUM, 6) + "." + rand(URLSAFE, 6) + ":" + rand(URLSAFE, 43),
    )
    add("livekit secret", "LIVEKIT_API_SECRET={S}", rand(ALNUM, 43))
    add(
        "cosmos connection string",
        "AccountEndpoint=https://acme.documents.azure.com:443/;AccountKey={S};",
        b64(64),
    )
    add(
        "service bus connection string",
        "Endpoint=sb://acme.servicebus.windows.net/;"
        "SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={S}",
        b64(32),
    )
    add(
        "properties private key",
        "jwt.private-key={S}",
        "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg" + rand(B64, 100),
    )
    add(
        "yaml block private key",
        "deploy:\n  ssh_private_key: |\n    {S}",
        "-----BEGIN OPENSSH PRIVATE KEY-----\n    "
        + "\n    ".join(rand(B64, 70) for _ in range(4))
        + "\n    -----END OPENSSH PRIVATE KEY-----",
    )
    add("assemblyai in code", 'aai.settings.api_key = "{S}"', hexs(32))
    add("hf login in code", 'login(token="{S}")', "hf_" + rand(string.ascii_letters, 34))
    add(
        "terraform provider token",
        'provider "github" {\n  token = "{S}"\n}',
        "ghp_" + rand(ALNUM, 36),
    )
    add("postmark header", "X-Postmark-Server-Token: {S}", uid())
    add("figma header", "X-Figma-Token: {S}", "figd_" + rand(URLSAFE, 40))
    add("jupyter url token", "http://127.0.0.1:8888/lab?token={S}", hexs(48))
    add(
        "aws credentials r2",
        "[r2]\naws_access_key_id = " + hexs(32) + "\naws_secret_access_key = {S}",
        hexs(64),
    )
    add(
        "cloudinary url",
        "CLOUDINARY_URL=cloudinary://" + str(R.randint(10**14, 10**15)) + ":{S}@acme",
        rand(URLSAFE, 27),
    )
    add("sentry legacy dsn", "https://" + hexs(32) + ":{S}@sentry.io/12345", hexs(32))

    # -- command lines -----------------------------------------------------------------------
    add("wandb login", "wandb login {S}", hexs(40))
    add(
        "helm repo add",
        "helm repo add acme https://charts.acme.io --username ci --password {S}",
        password(),
    )
    add("argocd login", "argocd login argocd.acme.io --username admin --password {S}", password())
    add("vault userpass", "vault write auth/userpass/users/ci password={S} policies=ci", password())
    add("cargo publish token", "cargo publish --token {S}", "cio" + rand(ALNUM, 32))
    add(
        "cloudflared token",
        "cloudflared tunnel run --token {S}",
        base64.b64encode(json.dumps({"a": hexs(32), "t": uid(), "s": b64(32)}).encode()).decode(),
    )
    add(
        "jenkins curl",
        "curl -u admin:{S} https://jenkins.acme.io/job/deploy/build",
        "11" + hexs(32),
    )
    add(
        "zendesk curl",
        "curl -u agent@acme.io/token:{S} https://acme.zendesk.com/api/v2/users",
        rand(ALNUM, 40),
    )
    add("mysql pwd env", "MYSQL_PWD={S} mysql -u app shop", password())
    add(
        "openssl passout",
        "openssl pkcs12 -export -in cert.pem -out cert.p12 -passout pass:{S}",
        password(),
    )
    add("7z password", "7z a -p{S} backup.7z ./data", password())
    add("htpasswd batch", "htpasswd -b -c /etc/nginx/.htpasswd admin {S}", password())
    add(
        "kubectl docker-registry",
        "kubectl create secret docker-registry regcred "
        "--docker-server=ghcr.io --docker-username=ci --docker-password={S}",
        rand(ALNUM, 24),
    )
    add("token as url user", "git clone https://{S}@git.acme.io/platform/api.git", rand(ALNUM, 40))
    add("sudo -S", "echo '{S}' | sudo -S apt-get update", password())

    # -- provider tokens in prose ------------------------------------------------------------
    add("vultr key prose", "vultr api key {S}", rand(UPPER_ALNUM, 36))
    add("render key prose", "render deploys with {S}", "rnd_" + rand(ALNUM, 32))
    add("neon key prose", "neon api key {S}", "napi_" + rand(LOWER_ALNUM, 64))
    add("pinecone key prose", "pinecone key {S}", "pcsk_" + rand(ALNUM, 5) + "_" + rand(ALNUM, 64))
    add("launchdarkly sdk key", "launchdarkly server key {S}", "sdk-" + uid())
    add("bitbucket app password", "bitbucket app password {S}", "ATBB" + rand(ALNUM, 32) + hexs(8))
    add("gitlab runner token", "runner registered with {S}", "glrt-" + rand(URLSAFE, 20))
    add("doppler personal token", "doppler personal token {S}", "dp.pt." + rand(ALNUM, 43))
    add("gcp hmac key", "GCS HMAC access id {S}", "GOOG1E" + rand(UPPER_ALNUM, 57))
    add("spaces key prose", "spaces access key {S}", "DO00" + rand(UPPER_ALNUM, 16))
    add("backblaze app key", "b2 application key {S}", "K005" + rand(ALNUM, 27))
    add("openrouter key", "openrouter key {S}", "sk-or-v1-" + hexs(64))
    add("together key", "together key {S}", "tgp_v1_" + rand(URLSAFE, 43))
    add("langsmith key", "langsmith key {S}", "lsv2_pt_" + hexs(32) + "_" + hexs(10))
    add("resend key", "resend api key {S}", "re_" + rand(ALNUM, 8) + "_" + rand(ALNUM, 24))
    add("elevenlabs key", "elevenlabs key {S}", "sk_" + hexs(48))
    add("refresh token prose", "the google refresh token is {S}", "1//0" + rand(URLSAFE, 99))
    add("figma prose", "figma personal token {S}", "figd_" + rand(URLSAFE, 40))
    return out


def negatives() -> list[dict[str, str]]:
    out: list[dict[str, str]] = []

    def add(form: str, *texts: str) -> None:
        out.extend({"form": form, "text": text} for text in texts)

    add(
        "public keys and ids",
        f"NEXT_PUBLIC_POSTHOG_KEY=phc_{rand(ALNUM, 43)}",
        f"CLERK_PUBLISHABLE_KEY=pk_live_{rand(ALNUM, 26)}",
        f"ALGOLIA_APP_ID={rand(UPPER_ALNUM, 10)}",
        "gtag('config', 'G-" + rand(UPPER_ALNUM, 10) + "') and GTM-" + rand(UPPER_ALNUM, 7),
        f"RECAPTCHA_SITE_KEY=6Lc{rand(URLSAFE, 37)}",
        f'data-sitekey="{uid()}"',
        f"AZURE_CLIENT_ID={uid()}\nAZURE_TENANT_ID={uid()}",
        f"age1{rand('qpzry9x8gf2tvdw0s3jn54khce6mua7l', 58)} is the recipient for the backups",
        f"[Peer]\nPublicKey = {b64(32)}\nAllowedIPs = 10.8.0.0/24",
        f"github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{rand(B64, 43)}",
        f"ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAI{rand(B64, 80)}= ops@bastion",
        f"caBundle: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t{rand(B64, 120)}",
        f"SHA1: {':'.join(hexs(2).upper() for _ in range(20))}",
        f"GPG fingerprint {' '.join(hexs(4).upper() for _ in range(10))}",
    )
    add(
        "ids in urls and apis",
        f"user_{rand(ALNUM, 27)} signed in twice",
        f"sess_{rand(ALNUM, 27)} expired",
        f"checkout session cs_test_a1{rand(ALNUM, 56)}",
        f"seti_{rand(ALNUM, 24)} and src_{rand(ALNUM, 24)}",
        f"prj_{rand(ALNUM, 28)} in team_{rand(ALNUM, 24)}",
        f"https://www.notion.so/acme/Roadmap-{hexs(32)}",
        f"https://www.figma.com/file/{rand(ALNUM, 22)}/Design-System",
        f"https://docs.google.com/document/d/1{rand(URLSAFE, 43)}/edit",
        f"https://drive.google.com/drive/folders/1{rand(URLSAFE, 32)}",
        f"https://acme.slack.com/archives/C{rand(UPPER_ALNUM, 10)}/p{R.randint(10**15, 10**16)}",
        f"https://www.youtube.com/watch?v={rand(URLSAFE, 11)}",
        f"/subscriptions/{uid()}/resourceGroups/rg-app/providers/Microsoft.Web/sites/api",
        f"instance i-{hexs(17)} in vpc-{hexs(17)}, subnet-{hexs(17)}",
        f"arn:aws:kms:eu-west-1:123456789012:key/{uid()}",
        f"oid sha256:{hexs(64)}\nsize 1048576",
        f'sha256 = "{hexs(64)}",',
        f'hash = "sha256-{b64(32)}";',
        f"nanoid {rand(URLSAFE, 21)} is the share link id",
        f"X-GitHub-Delivery: {uid()}",
        f"X-Hub-Signature-256: sha256={hexs(64)}",
        f"Stripe-Signature: t={R.randint(1_700_000_000, 1_800_000_000)},v1={hexs(64)}",
        f"code_challenge={rand(URLSAFE, 43)}&code_challenge_method=S256",
        f"/callback?state={rand(URLSAFE, 22)}&client_id=web-app",
        f'<script nonce="{b64(16)}">',
        f"Content-Security-Policy: script-src 'sha256-{b64(32)}'",
        "IMG_20240101_123456.jpg and chunk-vendors." + hexs(8) + ".js",
    )
    add(
        "encrypted or referenced, safe to commit",
        "password: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  "
        + "\n  ".join(hexs(64) for _ in range(3)),
        f"db_password: ENC[AES256_GCM,data:{b64(12)},iv:{b64(32)},tag:{b64(16)},type:str]",
        f"encryptedData:\n  password: AgBy3i4OJSWK+PiTySYZZA{rand(B64, 300)}==",
        '"password": "{{ .Values.db.password }}"',
        'SECRET_KEY = env("DJANGO_SECRET_KEY")',
        'token = getpass("Token: ")',
        'password = keyring.get_password("svc", user)',
        'assert "password" not in response.text',
        "AUTH_PASSWORD_VALIDATORS = [",
        'PASSWORD_HASHERS = ["django.contrib.auth.hashers.Argon2PasswordHasher"]',
        "CSRF_COOKIE_SECURE = True",
        "sensitive = true",
        "op item get 'staging db' --fields password",
        "kubectl get secret db -o jsonpath='{.data.password}'",
        "helm upgrade app ./chart --set auth.existingSecret=db-credentials",
        "docker login ghcr.io -u ci --password-stdin < ~/.ghcr-token",
        "cargo login < ~/.cargo/token",
        "ARGOCD_AUTH_TOKEN: ${{ secrets.ARGOCD_AUTH_TOKEN }}",
        "export HCLOUD_TOKEN=$(pass show hcloud/token)",
        "RABBITMQ_DEFAULT_PASS_FILE=/run/secrets/rabbit",
        "POSTGRES_PASSWORD_FILE: /run/secrets/pg_password",
        "--password-file ./secrets/admin.txt",
        "htpasswd -B /etc/nginx/.htpasswd admin",
        "7z x backup.7z (it asks for the password)",
        "openssl pkcs12 -export -in cert.pem -out cert.p12 -passout env:P12_PASSWORD",
        'echo "$SUDO_PASSWORD" | sudo -S true',
        "wandb login --relogin",
    )
    add(
        "logs and prose",
        "Authorization header missing on /api/v2/orders",
        "invalid token: signature has expired",
        "401 Unauthorized: Bad credentials",
        "paste the token into https://jwt.io to read its claims",
        "![build](https://img.shields.io/badge/build-passing-brightgreen)",
        "the pinecone index is 1536 dimensions, cosine",
        "the vultr instance in ams was rebooted at 03:10",
        "the Sentry DSN is public by design; rate limits protect it",
        "rotate the Cloudinary secret after the contractor leaves",
        "neon branches are cheap: one per pull request",
        "the render deploy hook is in the team vault",
        "langsmith traces are sampled at 10%",
        "sk-or-v1 keys are OpenRouter's; ours lives in 1Password",
        "the runner token expired, re-register with gitlab-runner register",
        "Backblaze key ids start with 005 and app keys with K005",
        "tokens with the ATBB prefix are Bitbucket app passwords",
        "the refresh token lasts 90 days unless revoked",
        "requirepass is set in the managed Redis, not in our config",
        "psk is the Wi-Fi passphrase; ours rotates monthly",
        "IDENTIFIED BY clauses in the migrations use placeholders",
    )
    return out


def build() -> dict[str, str]:
    """The second held-out corpus files' names and contents."""
    R.seed(SEED)
    files = {}
    for name, rows in (
        ("secrets_heldout2_positive.jsonl", positives()),
        ("secrets_heldout2_negative.jsonl", negatives()),
    ):
        files[name] = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    return files


def main() -> None:
    for name, text in build().items():
        (HERE / name).write_text(text, encoding="utf-8")
        print(f"{name}: {text.count(chr(10))} texts")


if __name__ == "__main__":
    main()
