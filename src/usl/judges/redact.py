"""Keeping secrets out of what a remote judge's failures show: logs, CLI output, HTTP answers.

An upstream that echoes the request (some proxies answer 400 with the headers they got) would put
the API key into our error message; a ``base_url`` may carry ``user:password@`` or ``?key=``.

>>> redact("HTTP 400: got Authorization: Bearer sk-abc123def456ghi789", secrets=("sk-abc123def456ghi789",))
'HTTP 400: got Authorization: [redacted]'
>>> redact("proxy said: Basic YWxpY2U6aHVudGVyMg== for http://alice:hunter2@h/v1")
'proxy said: Basic [redacted] for http://[redacted]@h/v1'
>>> public_url("https://user:pw@api.example/v1?key=abc")
'https://api.example/v1'
"""

from __future__ import annotations

import base64
import re
from typing import Iterable
from urllib.parse import urlsplit, urlunsplit

# Shapes of credentials, redacted even when we do not know the value (a key the upstream made up).
_PATTERNS = [
    re.compile(r"(?i)\b(authorization|proxy-authorization)(\"?\s*[:=]\s*\"?)[^\r\n,;\"}]*"),
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"(?i)\bbasic\s+([A-Za-z0-9+/]{4,}={0,2})(?![\w+/=])"),
    # user:password@ in a URL (with or without its scheme): the credentials go, the host stays
    re.compile(r"(?i)(?<![\w.%+-])([a-z][a-z0-9+.-]*://)?[^\s/:@\"'<>]+:[^\s/@\"'<>]*@(?=[\w\[])"),
    re.compile(r"(?i)\b(api[_-]?key|x-api-key|access[_-]?token|secret|password|token|key)\b(\"?\s*[:=]\s*\"?)"
               r"[^\s\"'&,;}]+"),
    re.compile(r"\b(sk|pk|rk|ghp|gho|xox[abp])[-_][A-Za-z0-9_-]{8,}"),
    re.compile(r"\bAIza[0-9A-Za-z_-]{20,}"),
]


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every known secret value and every credential-shaped token replaced."""
    for s in secrets:
        if s and len(s) >= 4:
            text = text.replace(s, "[redacted]")
    text = _PATTERNS[0].sub(lambda m: f"{m.group(1)}{m.group(2)}[redacted]", text)
    text = _PATTERNS[1].sub("Bearer [redacted]", text)
    text = _PATTERNS[2].sub(lambda m: "Basic [redacted]" if _is_basic(m.group(1)) else m.group(0), text)
    text = _PATTERNS[3].sub(lambda m: f"{m.group(1) or ''}[redacted]@", text)
    text = _PATTERNS[4].sub(lambda m: f"{m.group(1)}{m.group(2)}[redacted]", text)
    for p in _PATTERNS[5:]:
        text = p.sub("[redacted]", text)
    return text


def _is_basic(value: str) -> bool:
    """A Basic credential is base64 of ``user:password`` ("basic knowledge" is not one)."""
    try:
        return b":" in base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except ValueError:
        return False


def public_url(url: str) -> str:
    """``url`` without user:password@, query string or fragment."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "[unparseable url]"
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host + (f":{port}" if port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def public_judge(spec: str) -> str:
    """A judge spec as it may be shown: its ``base_url=`` option (an ``llm:`` judge) made public.

    >>> public_judge("llm:m,base_url=https://u:p@h/v1?k=1,concurrency=2")
    'llm:m,base_url=https://h/v1,concurrency=2'
    """
    if "base_url=" not in spec:
        return spec
    return re.sub(r"base_url=([^,\"\s]*)", lambda m: "base_url=" + public_url(m.group(1)), spec)
