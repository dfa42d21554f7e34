"""Which configured values are credentials, and how a URL is shown without them.

Read by `Config.secrets()` (what every sink masks) and by whatever shows a backend's URL.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from agentify.security.redact import MASK

_CREDENTIAL_NAME = re.compile(r"(?i)key|token|secret|passw|auth|credential|private|session|cookie")
_PLACE_VARIABLES = re.compile(
    r"HOME|PWD|OLDPWD|USER|LOGNAME|SHELL|TMPDIR|TEMP|TMP|PATH|LANG|XDG_[A-Z_]{1,64}_(HOME|DIR|DIRS)"
)
_AUTH_SCHEMES = frozenset({"bearer", "basic", "token", "digest", "apikey", "api-key", "key", "dpop"})
_QUERY_SECRET = re.compile(r"(?i)key|token|secret|passw|auth|sig|credential|code")


def is_credential(name: str, value: str) -> bool:
    """By its name (KEY, TOKEN, SECRET...), or a long value mixing letters and digits that is no path."""
    random_looking = len(value) >= 16 and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)
    return bool(_CREDENTIAL_NAME.search(name)) or (random_looking and "/" not in value)


# Names of arguments whose value is a credential: narrower than `_CREDENTIAL_NAME`, since `--auth-type oauth`
# or `--session-name x` carry none, and masking such values would blank common words out of every log line.
_SECRET_ARGUMENT = re.compile(
    r"(?i)(api[-_]?key|apikey|token|secret|passw(or)?d?|credential|private[-_]?key|access[-_]?key|(^|[-_])key)$"
)
_MIN_ARGUMENT_SECRET = 6


def argument_secrets(args: object) -> list[str]:
    """The credentials a command line carries: `--api-key VALUE`, `--token=VALUE`, `--password VALUE` (and the
    like) and `API_KEY=VALUE`-style arguments; values shorter than 6 characters are no credentials."""
    if not isinstance(args, list):
        return []
    words = [a for a in args if isinstance(a, str)]
    found: list[str] = []
    for i, word in enumerate(words):
        name, equals, value = word.partition("=")
        if equals:
            if _SECRET_ARGUMENT.search(name.lstrip("-")):
                found.append(value)
        elif word.startswith("-") and _SECRET_ARGUMENT.search(word.lstrip("-")) and i + 1 < len(words):
            following = words[i + 1]
            if not following.startswith("-"):
                found.append(following)
    return [v for v in found if len(v) >= _MIN_ARGUMENT_SECRET]


# What a tool's argument that takes a credential is called or says it is. A form must never ask for one (the MCP
# spec: form mode MUST NOT request sensitive information), and a false alarm only means agentify does not ask.
_SECRET_WORDS = (
    r"api ?key|access ?key|secret ?key|private ?key|client ?secret|consumer ?secret|app ?secret|secret|"
    r"(license|licence|product|encryption|decryption|signing|ssh|subscription|master|developer|app|application) ?key|"
    r"(access|auth|bearer|api|refresh|id|oauth|session|security|csrf|xsrf|personal access) ?token|token|jwt|bearer|"
    r"password|passwd|passphrase|passcode|pwd|pin ?(code|number)|credentials?|authori[sz]ation|auth|cookie|"
    r"session ?id|signature|otp|totp|hotp|mfa|2 ?fa|two ?factor|one ?time ?(code|password|pin|token)|"
    r"(verification|security|access|confirmation|recovery|backup|sms|login|auth|authentication) ?code|"
    r"(seed|mnemonic|recovery|secret) ?(phrase|words)|mnemonic|cvv|cvc|ssn|social security number|card number|"
    r"credit card"
)
_SECRET_NAME = re.compile(rf"(?:^| )(?:{_SECRET_WORDS})(?: |$)|(?:^| )pin$")  # `pin`, `userPin`; not `pin_tab`
# A secret key shown in a description: `sk-...`, `sk-proj-...`, `sk_live_4eC3...`, `rk_test_...`. Its prefix alone is
# no key (`sk-learn`, a sort key's `sk_attribute`): an ellipsis or a token's shape must follow, that is letters
# and digits mixed, or 20 and more of them. `pk_` keys are publishable, and `pk_id` a primary key.
_KEY_TOKEN = r"(?:[A-Za-z0-9]*(?:\.\.\.|\u2026)|(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{8,}|[A-Za-z0-9]{20,})"
_SHOWN_KEY = (
    rf"(?<![\w-])(?:sk|rk)[-_](?:(?:proj|ant|svcacct|admin|live|test)[-_])?{_KEY_TOKEN}"
    r"|(?<![\w-])(?:ghp|gho|github_pat|xox[abp])[-_]"  # GitHub's and Slack's prefixes are keys by themselves
)
# In a description, a bare "key" is a dictionary's, a sort's or a keyboard's, and "pin" a verb or a GPIO pin:
# only "your (OpenAI) key", a key shown as "sk-...", "your PIN" or an upper-case PIN are credentials.
_SECRET_DESCRIPTION = re.compile(
    rf"(?i)\b(?:{_SECRET_WORDS.replace(' ?', '[ _-]?')}|your(?: [\w.-]+){{0,2}} (?:key|pin))\b"
    rf"|{_SHOWN_KEY}"
    r"|(?-i:\bPIN\b)"
)
_NAME_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def secret_argument(name: str, description: str = "") -> bool:
    """Whether a tool's argument takes a credential, by its name (`api_key`, `apiKey`, `X-Auth-Token`, `password`,
    `pin`) or what it says it is, its description or title ("your API key", "the access token", "Your OpenAI key
    (sk-...)", "the verification code we sent"): never asked of a person in a form."""
    spoken = " ".join(word.lower() for word in _NAME_WORDS.findall(name))
    return bool(_SECRET_NAME.search(spoken) or _SECRET_DESCRIPTION.search(description))


def names_a_place(variable: str) -> bool:
    """Variables that name places or people, not secrets: masking `/home/ada` would hide every path in the log."""
    return bool(_PLACE_VARIABLES.fullmatch(variable))


def header_credential(value: str) -> str | None:
    """The credential of "Bearer ghp_...", which errors and echoes quote without its scheme word."""
    scheme, _, credential = value.partition(" ")
    if scheme.lower() not in _AUTH_SCHEMES:
        return None
    return credential.strip() or None


def url_secrets(url: str | None) -> list[str]:
    """The userinfo password and the secret-looking query values of a URL."""
    if not url:
        return []
    parts = urlsplit(url)
    values = [parts.password or ""]
    values += [v for k, v in parse_qsl(parts.query) if _QUERY_SECRET.search(k) or is_credential(k, v)]
    return [v for v in values if v]


def mask_url(url: str) -> str:
    """The URL with its userinfo and secret-looking query values replaced by the mask."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = MASK + "@" + netloc.rsplit("@", 1)[1]
    query = "&".join(
        f"{k}={MASK if (_QUERY_SECRET.search(k) or is_credential(k, v)) else v}"
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
