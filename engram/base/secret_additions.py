"""Engram's own secret formats, in the maintained rule set's shape: the forms it lacks or only reports in pairs.

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

ADDITIONS: list[dict[str, object]] = [
    {"id": "engram.aws-access-key-id", "type": "AWS access key",
     "regex": r"\b((?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16})(?![A-Za-z0-9])",
     "keywords": ["a3t", "akia", "asia", "abia", "acca"],
     "why": "betterleaks reports an access key id only with its secret within 5 lines; "
            "the id alone names an account and a key to attack"},
    {"id": "engram.google-oauth-access-token", "type": "Google OAuth token",
     "regex": r"\b(ya29\.[0-9A-Za-z_\-]{20,})", "keywords": ["ya29."],
     "why": "not in betterleaks"},
    {"id": "engram.openai-api-key", "type": "OpenAI API key",
     "regex": r"\b(sk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{20,}|sk-[A-Za-z0-9]{48})" + _END,
     "keywords": ["sk-"],
     "why": "betterleaks' rule needs the T3BlbkFJ marker that newer keys do not carry"},
    {"id": "engram.anthropic-api-key", "type": "Anthropic API Key",
     "regex": r"\b(sk-ant-[A-Za-z0-9_\-]{20,})", "keywords": ["sk-ant-"],
     "why": "betterleaks wants the exact length of today's keys; the prefix alone says what "
            "it is"},
    {"id": "engram.mailchimp-api-key", "type": "Mailchimp API key",
     "regex": r"\b([0-9a-f]{32}-us\d{1,2})\b", "keywords": ["-us"],
     "why": "betterleaks finds it only assigned to a name with `mailchimp`"},
    {"id": "engram.telegram-bot-token", "type": "Telegram bot token",
     "regex": r"\b(\d{8,10}:AA[A-Za-z0-9_\-]{33})" + _END, "keywords": [":aa"],
     "why": "betterleaks finds it only assigned to a name with `telegr`"},
    {"id": "engram.stripe-webhook-secret", "type": "Stripe webhook secret",
     "regex": r"\b(whsec_[A-Za-z0-9+/=]{24,})", "keywords": ["whsec_"],
     "why": "not in betterleaks"},
    {"id": "engram.discord-bot-token", "type": "Discord bot token",
     "regex": r"(?<![A-Za-z0-9_\-.])([MNO][A-Za-z0-9_\-]{23,25}\.[A-Za-z0-9_\-]{6}"
              r"\.[A-Za-z0-9_\-]{27,38})" + _END,
     "keywords": [], "gate": r"\.[A-Za-z0-9_\-]{6}\.", "keep_all": ["[0-9]"],
     "why": "betterleaks has Discord client secrets, not bot tokens"},
    {"id": "engram.discord-webhook", "type": "Discord webhook token",
     "regex": r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d{17,20}"
              r"/([A-Za-z0-9_\-]{60,80})",
     "keywords": ["discord"], "why": "not in betterleaks"},
    {"id": "engram.putty-private-key", "type": "PuTTY private key",
     "regex": r"Private-Lines: *\d+\r?\n([A-Za-z0-9+/=]{16,}(?:\r?\n[A-Za-z0-9+/=]+(?=\r?\n|$))*)",
     "keywords": ["private-lines"], "why": "not in betterleaks (.ppk files)"},
    {"id": "engram.jwt-signing-literal", "type": "JWT signing secret",
     "regex": r"\bjwt\.(?:encode|sign)\(\s*[^,()\n]+,\s*(?:key\s*=\s*)?([\"'])([^\"'\s]{8,})\1",
     "group": 2, "keywords": ["jwt."], "placeholders": True,
     "why": "a literal key handed to jwt.encode or jwt.sign has no name that says so"},
    {"id": "engram.kubeconfig-client-key", "type": "Kubernetes client key",
     "regex": r"\bclient-key-data:[ \t]*[\"']?([A-Za-z0-9+/]{40,}={0,2})",
     "keywords": ["client-key-data"], "why": "not in betterleaks (kubeconfig files)"},
    {"id": "engram.registry-auth", "type": "registry credentials",
     "regex": r"\"(?:auth|identitytoken)\"\s*:\s*\"([A-Za-z0-9+/]{8,}={0,2})\"",
     "keywords": ["\"auth\"", "\"identitytoken\""], "placeholders": True,
     "why": "not in betterleaks (docker and podman config.json)"},
    {"id": "engram.npmrc-auth", "type": "npm credentials",
     "regex": r"(?:^|[\s:])_(?:auth|password)[ \t]*=[ \t]*([A-Za-z0-9+/]{8,}={0,2})(?![^\s])",
     "keywords": ["_auth", "_password"], "placeholders": True,
     "why": "not in betterleaks (.npmrc base64 credentials)"},
    {"id": "engram.okta-ssws", "type": "Okta API token",
     "regex": r"\bSSWS[ \t]+(00[A-Za-z0-9_\-]{40})" + _END, "keywords": ["ssws"],
     "why": "betterleaks finds it only assigned to a name with `okta`"},
    {"id": "engram.azure-storage-key-listing", "type": "Azure storage account key",
     "regex": r"\"keyName\"\s*:\s*\"[^\"\n]*\"(?s:.){0,200}?\"value\"\s*:\s*"
              r"\"([A-Za-z0-9+/]{86}==)\"",
     "keywords": ["keyname"],
     "why": "betterleaks wants the account name within 8 lines; `az storage account keys "
            "list` prints none"},
    {"id": "engram.prefixed-token", "type": "token",
     "regex": r"(?<![A-Za-z0-9_\-.+/=])([A-Za-z][A-Za-z0-9]{1,11}(?:[_\-][A-Za-z0-9]{1,11}){0,2}"
              r"[_\-]([A-Za-z0-9]{32,}))" + _END,
     "keywords": [], "gate": "[A-Za-z0-9]{32}", "group": 1, "entropy": ["<", 4.0],
     "keep_all": ["[A-Z]", "[a-z]", "[0-9]"],
     "drop": [r"^(?i:sha\d*|md5|h1|blake2\w*|sri)[_\-]"],
     "why": "the shape of tokens services issue now, for the services no rule names yet"},
]
