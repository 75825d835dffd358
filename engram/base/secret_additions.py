"""Engram's secret formats in the rule set's shape: what betterleaks lacks or reports only in pairs.

Each entry is a rule as `secret_rules.json` holds them (see `secret_rules.py`), with `why` it is
here rather than upstream. `placeholders: True` marks a rule whose value is a plain string
someone chose (a `.netrc` password, a registry's `auth`): Engram's placeholder policy
(`secrets._placeholder`) applies to it, as it does to every value found by its context.

The last rule is a shape, not a provider: a token that starts with a short issuer prefix and a
separator (`xyz_`, `abc-`, `pfx_tkn_`) and goes on with 32 or more random characters that mix
upper and lower case and digits. Services issue tokens of that shape now (GitHub's, GitLab's,
Slack's, npm's, ...), so it catches those of services no rule names yet; ids (`cus_`, `msg_01`,
`chatcmpl-`) are shorter and digests (`sha512-`) are named and set aside.
"""

from __future__ import annotations

_END = r"(?![A-Za-z0-9_\-])"
# An issuer's prefix is one case, as a name is: ghp, glpat, CFPAT, fo1, pscale (not n3dS, which
# is where a random base64url string happens to have a `_`).
# The lookaheads are bounded (an issuer is at most 12 characters before its separator): an
# unbounded `[a-z0-9]*[a-z][a-z0-9]*` is quadratic on a long run of letters.
_ISSUER = (
    r"[a-z](?=[a-z0-9]{0,10}[a-z][a-z0-9]{0,10}[_\-.])[a-z0-9]{1,11}"
    r"|[A-Z](?=[A-Z0-9]{0,10}[A-Z][A-Z0-9]{0,10}[_\-.])[A-Z0-9]{1,11}"
)
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"

ADDITIONS: list[dict[str, object]] = [
    {
        "id": "engram.aws-access-key-id",
        "type": "AWS access key",
        "regex": r"\b((?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16})(?![A-Za-z0-9])",
        "keywords": ["a3t", "akia", "asia", "abia", "acca"],
        "why": "betterleaks reports an access key id only with its secret within 5 lines; "
        "the id alone names an account and a key to attack",
    },
    {
        "id": "engram.google-oauth-access-token",
        "type": "Google OAuth token",
        "regex": r"\b(ya29\.[0-9A-Za-z_\-]{20,})",
        "keywords": ["ya29."],
        "why": "not in betterleaks",
    },
    {
        "id": "engram.openai-api-key",
        "type": "OpenAI API key",
        "regex": r"\b(sk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{20,}|sk-[A-Za-z0-9]{48})" + _END,
        "keywords": ["sk-"],
        "why": "betterleaks' rule needs the T3BlbkFJ marker that newer keys do not carry",
    },
    {
        "id": "engram.anthropic-api-key",
        "type": "Anthropic API Key",
        "regex": r"\b(sk-ant-[A-Za-z0-9_\-]{20,})",
        "keywords": ["sk-ant-"],
        "why": "betterleaks wants the exact length of today's keys; the prefix alone says what "
        "it is",
    },
    {
        "id": "engram.mailchimp-api-key",
        "type": "Mailchimp API key",
        "regex": r"\b([0-9a-f]{32}-us\d{1,2})\b",
        "keywords": ["-us"],
        "why": "betterleaks finds it only assigned to a name with `mailchimp`",
    },
    {
        "id": "engram.telegram-bot-token",
        "type": "Telegram bot token",
        "regex": r"\b(\d{8,10}:AA[A-Za-z0-9_\-]{33})" + _END,
        "keywords": [":aa"],
        "why": "betterleaks finds it only assigned to a name with `telegr`",
    },
    {
        "id": "engram.stripe-webhook-secret",
        "type": "Stripe webhook secret",
        "regex": r"\b(whsec_[A-Za-z0-9+/=]{24,})",
        "keywords": ["whsec_"],
        "why": "not in betterleaks",
    },
    {
        "id": "engram.discord-bot-token",
        "type": "Discord bot token",
        "regex": r"(?<![A-Za-z0-9_\-.])([MNO][A-Za-z0-9_\-]{23,25}\.[A-Za-z0-9_\-]{6}"
        r"\.[A-Za-z0-9_\-]{27,38})" + _END,
        "keywords": [],
        "gate": r"\.[A-Za-z0-9_\-]{6}\.",
        "after": 40,
        "keep_all": ["[0-9]"],
        "why": "betterleaks has Discord client secrets, not bot tokens",
    },
    {
        "id": "engram.discord-webhook",
        "type": "Discord webhook token",
        "regex": r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d{17,20}"
        r"/([A-Za-z0-9_\-]{60,80})",
        "keywords": ["discord"],
        "why": "not in betterleaks",
    },
    {
        "id": "engram.putty-private-key",
        "type": "PuTTY private key",
        "regex": r"Private-Lines: *\d+\r?\n([A-Za-z0-9+/=]{16,}(?:\r?\n[A-Za-z0-9+/=]+(?=\r?\n|$))*)",
        "keywords": ["private-lines"],
        "why": "not in betterleaks (.ppk files)",
    },
    {
        "id": "engram.jwt-signing-literal",
        "type": "JWT signing secret",
        "regex": r"\bjwt\.(?:encode|sign)\(\s*[^,()\n]+,\s*(?:key\s*=\s*)?([\"'])([^\"'\s]{8,})\1",
        "group": 2,
        "keywords": ["jwt."],
        "placeholders": True,
        "why": "a literal key handed to jwt.encode or jwt.sign has no name that says so",
    },
    {
        "id": "engram.kubeconfig-client-key",
        "type": "Kubernetes client key",
        "regex": r"\bclient-key-data:[ \t]*[\"']?([A-Za-z0-9+/]{40,}={0,2})",
        "keywords": ["client-key-data"],
        "why": "not in betterleaks (kubeconfig files)",
    },
    {
        "id": "engram.registry-auth",
        "type": "registry credentials",
        "regex": r"\"(?:auth|identitytoken)\"\s*:\s*\"([A-Za-z0-9+/]{8,}={0,2})\"",
        "keywords": ['"auth"', '"identitytoken"'],
        "placeholders": True,
        "why": "not in betterleaks (docker and podman config.json)",
    },
    {
        "id": "engram.npmrc-auth",
        "type": "npm credentials",
        "regex": r"_(?:auth|password)[ \t]*=[ \t]*([A-Za-z0-9+/]{8,}={0,2})(?![^\s])",
        "before": r"(?:^|[\s:])$",
        "keywords": ["_auth", "_password"],
        "placeholders": True,
        "why": "not in betterleaks (.npmrc base64 credentials)",
    },
    {
        "id": "engram.okta-ssws",
        "type": "Okta API token",
        "regex": r"\bSSWS[ \t]+(00[A-Za-z0-9_\-]{40})" + _END,
        "keywords": ["ssws"],
        "why": "betterleaks finds it only assigned to a name with `okta`",
    },
    {
        "id": "engram.azure-storage-key-listing",
        "type": "Azure storage account key",
        "regex": r"\"keyName\"\s*:\s*\"[^\"\n]*\"(?s:.){0,200}?\"value\"\s*:\s*"
        r"\"([A-Za-z0-9+/]{86}==)\"",
        "keywords": ["keyname"],
        "why": "betterleaks wants the account name within 8 lines; `az storage account keys "
        "list` prints none",
    },
    {
        "id": "engram.alibaba-access-key-id",
        "type": "Alibaba Cloud AccessKey ID",
        "regex": r"\b(LTAI[A-Za-z0-9]{17,21})\b",
        "keywords": ["ltai"],
        "why": "betterleaks reports it only with its secret nearby; the id alone names a key",
    },
    {
        "id": "engram.new-relic-user-key",
        "type": "New Relic user key",
        "regex": r"\b(NRAK-[A-Z0-9]{27})\b",
        "keywords": ["nrak-"],
        "why": "betterleaks finds it only after a name with `new relic`",
    },
    {
        "id": "engram.tailscale-key",
        "type": "Tailscale key",
        "regex": r"\b(tskey-(?:auth|api|client|scim|webhook)-[A-Za-z0-9]{6,}-[A-Za-z0-9]{16,})\b",
        "keywords": ["tskey-"],
        "why": "not in betterleaks",
    },
    {
        "id": "engram.mailgun-private-key",
        "type": "Mailgun private key",
        "regex": r"\b(key-[0-9a-f]{32})\b",
        "keywords": ["key-"],
        "why": "betterleaks finds it only after a name with `mailgun`",
    },
    {
        "id": "engram.fcm-server-key",
        "type": "Firebase Cloud Messaging server key",
        "regex": r"\b(AAAA[A-Za-z0-9_\-]{7}:APA91b[A-Za-z0-9_\-]{120,})",
        "keywords": [":apa91b"],
        "why": "not in betterleaks",
    },
    {
        "id": "engram.twitter-bearer-token",
        "type": "Twitter bearer token",
        "regex": r"\b(A{20,22}[A-Za-z0-9%]{30,})",
        "keywords": ["aaaaaaaaaaaaaaaaaaaa"],
        "why": "betterleaks finds it only after a name with `twitter`",
    },
    {
        "id": "engram.facebook-access-token",
        "type": "Facebook access token",
        "regex": r"\b(EAA[A-Za-z0-9]{100,})",
        "keywords": ["eaa"],
        "keep_all": ["[0-9]", "[a-z]"],
        "why": "betterleaks finds it only after a name with `facebook`",
    },
    {
        "id": "engram.crates-io-token",
        "type": "crates.io token",
        "regex": r"\b(cio[A-Za-z0-9]{32})\b",
        "keywords": ["cio"],
        "keep_all": ["[A-Z]", "[a-z]", "[0-9]"],
        "why": "not in betterleaks",
    },
    {
        "id": "engram.nuget-api-key",
        "type": "NuGet API key",
        "regex": r"\b(oy2[a-z0-9]{43})\b",
        "keywords": ["oy2"],
        "keep_all": ["[0-9]"],
        "why": "not in betterleaks",
    },
    {
        "id": "engram.braintree-access-token",
        "type": "Braintree access token",
        "regex": r"\b(access_token\$(?:production|sandbox)\$[a-z0-9]{16}\$[a-f0-9]{32})",
        "keywords": ["access_token$"],
        "why": "not in betterleaks",
    },
    {
        "id": "engram.asana-pat",
        "type": "Asana personal access token",
        "regex": r"(?<![\w/])([12]/\d{13,19}/\d{13,19}:[a-f0-9]{32})\b",
        "keywords": [],
        "gate": r"\d/\d",
        "after": 80,
        "why": "betterleaks finds it only after a name with `asana`",
    },
    {
        "id": "engram.openvpn-static-key",
        "type": "OpenVPN static key",
        "regex": r"(-----BEGIN OpenVPN Static key V1-----[\s\S]+?-----END OpenVPN Static key V1-----)",
        "keywords": ["openvpn static key"],
        "why": "not in betterleaks",
    },
    {
        "id": "engram.pgpass-line",
        "type": "password",
        "regex": r"(?m)^[ \t]*[\w.\-]+:(?:\d{1,5}|\*):[\w.\-*]+:[\w.\-*@]+:([^\s:]+)[ \t]*$",
        "keywords": [],
        "gate": r":(?:\d{1,5}|\*):",
        "after": 200,
        "placeholders": True,
        "why": "a .pgpass line: host:port:database:user:password",
    },
    {
        "id": "engram.sql-password",
        "type": "password",
        "regex": r"'([^'\s]{4,})'",
        "before": r"(?i)(?:^|\W)(?:identified[ \t]+by|password)[ \t]+$",
        "keywords": ["identified", "password"],
        "placeholders": True,
        "why": "CREATE USER ... IDENTIFIED BY 'x', ALTER USER ... WITH PASSWORD 'x'",
    },
    {
        "id": "engram.redis-directive",
        "type": "password",
        "regex": r"(?im)^[ \t]*(?:requirepass|masterauth)[ \t]+([^\s#\"']{4,})",
        "keywords": ["requirepass", "masterauth"],
        "placeholders": True,
        "why": "redis.conf directives: the password follows the name after a space",
    },
    {
        "id": "engram.smbclient-password",
        "type": "password",
        "regex": r"\bsmbclient\b[^\n|;]{0,200}?[ \t](?:-U|--user(?:name)?=?)[ \t]*[^\s%]+%([^\s'\"]+)",
        "keywords": ["smbclient"],
        "placeholders": True,
        "why": "smbclient -U user%password",
    },
    {
        "id": "engram.ngrok-authtoken",
        "type": "ngrok authtoken",
        "regex": r"\b(?:add-authtoken|authtoken:?)[ \t]+([A-Za-z0-9_]{30,})\b",
        "keywords": ["authtoken"],
        "placeholders": True,
        "why": "not in betterleaks",
    },
    {
        "id": "engram.basic-auth-tuple",
        "type": "password",
        "regex": r"auth\s*=\s*\(\s*([\"'])[^\"'\n]*\1\s*,\s*([\"'])([^\"'\s]{4,})\2\s*\)",
        "group": 3,
        "before": r"(?:^|\W)$",
        "keywords": ["auth"],
        "placeholders": True,
        "why": "requests' and httpx's auth=(user, password)",
    },
    {
        "id": "engram.echo-to-login",
        "type": "password",
        "regex": r"\becho[ \t]+(?:-n[ \t]+)?([\"']?)([^\s\"'|]{4,})\1[ \t]*\|[ \t]*"
        r"(?:(?:docker|podman|nerdctl|buildah|skopeo|oras|helm(?:[ \t]+registry)?)[ \t]+"
        r"login\b[^\n]*--password-stdin"
        r"|sudo[ \t]+(?:-[A-Za-z]+[ \t]+)*-[A-Za-z]*S\b)",
        "group": 2,
        "keywords": ["password-stdin", "sudo"],
        "placeholders": True,
        "why": "a password piped into a registry login or sudo -S",
    },
    {
        "id": "engram.openssl-pass",
        "type": "password",
        "regex": r"[ \t]-pass(?:in|out)?[ \t]+pass:([^\s'\"]+)",
        "keywords": ["pass:"],
        "placeholders": True,
        "why": "openssl -passin/-passout pass:PASSWORD",
    },
    {
        "id": "engram.archive-password",
        "type": "password",
        "regex": r"\b(?:7z[a]?[ \t][^\n|;]{0,120}?[ \t]-p"
        r"|(?:zip|unzip)[ \t][^\n|;]{0,120}?[ \t]-P[ \t]+)"
        r"([^\s'\"]+)",
        "keywords": ["7z", "zip"],
        "placeholders": True,
        "why": "7z -pPASSWORD, zip -P PASSWORD",
    },
    {
        "id": "engram.htpasswd-batch",
        "type": "password",
        "regex": r"\bhtpasswd[ \t]+(?:-[A-Za-z]+[ \t]+)*-[A-Za-z]*b[A-Za-z]*[ \t]+"
        r"(?:-[A-Za-z]+[ \t]+)*"
        r"[^\s-]\S*[ \t]+\S+[ \t]+([^\s'\"]+)",
        "keywords": ["htpasswd"],
        "placeholders": True,
        "why": "htpasswd -b FILE USER PASSWORD",
    },
    {
        "id": "engram.login-token",
        "type": "token",
        "regex": r"\blogin[ \t]+([A-Za-z0-9_\-]{32,})(?![^\s])",
        "keywords": ["login"],
        "entropy": ["<", 3.0],
        "keep_all": ["[0-9]", "[A-Za-z]"],
        "why": "a tool's `login TOKEN` (wandb, vault, ...)",
    },
    {
        "id": "engram.url-token-user",
        "type": "token in URL",
        "regex": r"\b[a-z][a-z0-9+.\-]*://([A-Za-z0-9_\-]{20,})@",
        "keywords": ["://"],
        "entropy": ["<", 3.5],
        "keep_all": ["[A-Z]", "[a-z]", "[0-9]"],
        "why": "https://TOKEN@host: a token given as the URL's user",
    },
    {
        "id": "engram.lftp-password",
        "type": "password",
        "regex": r"\blftp\b[^\n|;]{0,120}?[ \t]-u[ \t]+[^\s,]+,([^\s'\"]+)",
        "keywords": ["lftp"],
        "placeholders": True,
        "why": "lftp -u user,password",
    },
    {
        "id": "engram.az-login-password",
        "type": "password",
        "regex": r"\baz[ \t]+login\b[^\n|;]{0,200}?[ \t](?:-p|--password)(?:[ \t]+|=)([^\s'\"]+)",
        "keywords": ["az"],
        "placeholders": True,
        "why": "az login -p SECRET",
    },
    {
        "id": "engram.aws-configure-set",
        "type": "AWS secret access key",
        "regex": r"\baws[ \t]+configure[ \t]+set[ \t]+(?:\S*\.)?(?:aws_secret_access_key|"
        r"aws_session_token)[ \t]+([^\s'\"]+)",
        "keywords": ["configure"],
        "placeholders": True,
        "why": "aws configure set aws_secret_access_key VALUE",
    },
    {
        "id": "engram.credentials-pair-in-prose",
        "type": "password",
        "regex": r"(?i)\b(?:creds|credentials|login)\b[^\n]{0,40}?(?:\bare|\bis|:)[ \t]+[^\s/]+[ \t]*/"
        r"[ \t]*([^\s'\"]{6,})",
        "keywords": ["creds", "credentials", "login"],
        "keep_all": ["[A-Za-z]", "[0-9]"],
        "placeholders": True,
        "why": "`the creds are admin / PASSWORD`",
    },
    {
        "id": "engram.use-as-password",
        "type": "password",
        "regex": r"(?i)\buse[ \t]+([^\s'\"]{6,})[ \t]+as[ \t]+(?:the[ \t]+|a[ \t]+)?"
        r"(?:password|passphrase|"
        r"token|api[ _\-]?key|secret)\b",
        "keywords": ["use"],
        "keep_all": ["[A-Za-z]", "[0-9]"],
        "placeholders": True,
        "why": "`use PASSWORD as the password`",
    },
    {
        "id": "engram.plaid-access-token",
        "type": "Plaid access token",
        "regex": r"\b(access-production-" + _UUID + r")\b",
        "keywords": ["access-production-"],
        "why": "betterleaks finds it only after `plaid`",
    },
    {
        "id": "engram.twitch-oauth-token",
        "type": "Twitch OAuth token",
        "regex": r"\boauth:([a-z0-9]{30})\b",
        "keywords": ["oauth:"],
        "keep_all": ["[0-9]"],
        "why": "not in betterleaks (IRC chat logins)",
    },
    {
        "id": "engram.hubspot-private-app-token",
        "type": "HubSpot private app token",
        "regex": r"\b(pat-(?:na|eu|ap)\d-" + _UUID + r")\b",
        "keywords": ["pat-"],
        "why": "betterleaks finds it only after `hubspot`",
    },
    {
        "id": "engram.honeycomb-ingest-key",
        "type": "Honeycomb ingest key",
        "regex": r"\b(hc[a-z]ik_[a-z0-9]{58})\b",
        "keywords": ["ik_"],
        "keep_all": ["[0-9]"],
        "why": "betterleaks has Honeycomb's configuration keys only",
    },
    {
        "id": "engram.launchdarkly-sdk-key",
        "type": "LaunchDarkly SDK key",
        "regex": r"\b(sdk-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b",
        "keywords": ["sdk-"],
        "why": "betterleaks finds it only after a name with `launchdarkly`",
    },
    {
        "id": "engram.gcs-hmac-access-id",
        "type": "Google Cloud Storage HMAC key",
        "regex": r"\b(GOOG1[A-Z0-9]{55,70})\b",
        "keywords": ["goog1"],
        "why": "not in betterleaks",
    },
    {
        "id": "engram.session-cookie",
        "type": "session cookie",
        "regex": r"(?i)\b(?:set-)?cookie:[^\n]{0,300}?\b(?:session(?:id)?|sid|connect\.sid|phpsessid|"
        r"jsessionid|[a-z0-9_]+_session)=([^;\s]{16,})",
        "keywords": ["cookie:"],
        "placeholders": True,
        "why": "a session cookie is a login",
    },
    {
        "id": "engram.client-literal",
        "type": "API key",
        "regex": r"\b\w*[Cc]lient\(\s*(?:api_key\s*=\s*)?([\"'])([A-Za-z0-9_\-]{20,})\1",
        "group": 2,
        "keywords": ["client("],
        "keep_all": ["[A-Za-z]", "[0-9]"],
        "placeholders": True,
        "why": 'an SDK client built with a literal key: Client("...")',
    },
    {
        "id": "engram.named-key-in-prose",
        "type": "API key",
        "regex": r"(?i)[ \t](?:key|token|secret|pat)[ \t]+([A-Za-z0-9_\-.$/:%+=]{20,})",
        "before": r"(?i)\b(?:api|application|app|access|secret|private|signing|master|admin|"
        r"service|deploy|account|management|personal|integration|bearer|bot|refresh|auth|"
        r"session)$",
        "keywords": ["key", "token", "secret", "pat"],
        "entropy": ["<", 3.0],
        "keep_all": ["[A-Za-z]", "[0-9]"],
        "placeholders": True,
        "why": "`application key VALUE`, `service token VALUE`: a credential named in prose",
    },
    {
        "id": "engram.prefixed-token",
        "type": "token",
        "regex": r"(?<![A-Za-z0-9_\-.+/=])((?:"
        + _ISSUER
        + r")(?:[_\-.][a-z0-9]{1,11}|[_\-.][A-Z0-9]{1,11})"
        r"{0,2}[_\-.][A-Za-z0-9][A-Za-z0-9_\-]{31,}(?:\.[A-Za-z0-9_\-]+)*)" + _END,
        "keywords": [],
        "gate": r"[_\-.][A-Za-z0-9][A-Za-z0-9_\-]{31,}(?:\.[A-Za-z0-9_\-]+)*",
        "entropy": ["<", 4.0],
        "keep_all": ["[A-Z].*[A-Z]", "[a-z]", "[0-9]"],
        "drop": [
            r"^(?i:sha\d*|md5|h1|blake2\w*|sri)[_\-]",
            r"^(?i:phc|pk|pub|publishable)[_\-]",  # public by design (PostHog, Stripe, ...)
            r"^(?:cs|pi|seti|src|ch|cus|evt|price|prod|acct|sub|in)_(?:test_|live_)?",
        ],  # ids
        "why": "the shape of tokens services issue now, for the services no rule names yet",
    },
    {
        "id": "engram.prefixed-hex-token",
        "type": "token",
        "regex": r"(?<![A-Za-z0-9_\-.+/=])([a-z]{2,5}_[0-9a-f]{32,64})(?![A-Za-z0-9_\-])",
        "keywords": [],
        "gate": "_[0-9a-f]{32}",
        "after": 40,
        "entropy": ["<", 3.0],
        "keep_all": ["[0-9]", "_[0-9a-f]*[a-f]"],
        "drop": [r"^(?:sha|md5|git|rev|ref|oid|hash)_"],
        "why": "a short prefix and a long hexadecimal secret (squ_, sgp_, sbp_, ...)",
    },
]
