"""One exception tree for spectrn, and the exit code each branch maps to.

    SpectrnError                exit 1   anything spectrn reports on purpose
    +-- ConfigError             exit 2   bad configuration, flags, files or other user input
    +-- RenderError             exit 3   a template produced something invalid
    +-- BenchError              exit 4   load generation could not run or produced unusable results
    |   +-- EndpointError       exit 4   an endpoint is unreachable or answers wrongly
    +-- AnalysisError           exit 5   results cannot be analyzed (missing or corrupt files)
    +-- PublishError            exit 6   CloudWatch rejected or failed part of a publish
    +-- KubeError               exit 7   the Kubernetes API refused or failed a call
    |   +-- DeployError         exit 7   a workload did not become ready (with a diagnosis)
    +-- SimError                exit 8   the simulated server could not start or was misconfigured
    +-- Interrupted             exit 130 the user stopped the command (Ctrl-C); partial results kept
        +-- Terminated          exit 143 the process was sent SIGTERM; partial results kept

Every message says what is wrong and what to do next. The CLI catches ``SpectrnError`` only,
prints ``Type: message`` and exits with ``exit_code``; anything else is a bug and shows a traceback.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from spectrn.sanitize import terminal


class SpectrnError(Exception):
    """Base of every error spectrn raises on purpose."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        text = redact(self.message)
        if self.hint:
            text = f"{text} (fix: {redact(self.hint)})"
        return printable(text)


class ConfigError(SpectrnError):
    exit_code = 2


class RenderError(SpectrnError):
    exit_code = 3


class BenchError(SpectrnError):
    exit_code = 4


class EndpointError(BenchError):
    pass


class AnalysisError(SpectrnError):
    exit_code = 5


class PublishError(SpectrnError):
    exit_code = 6


class KubeError(SpectrnError):
    exit_code = 7


class DeployError(KubeError):
    pass


class SimError(SpectrnError):
    exit_code = 8


class Interrupted(SpectrnError):
    exit_code = 130


class Terminated(Interrupted):
    """SIGTERM (``kill``, a Kubernetes pod deletion): 128 + 15, as a shell reports a process ended by it."""

    exit_code = 143


EXIT_CODES: dict[str, int] = {
    cls.__name__: cls.exit_code
    for cls in (
        SpectrnError,
        ConfigError,
        RenderError,
        BenchError,
        EndpointError,
        AnalysisError,
        PublishError,
        KubeError,
        DeployError,
        SimError,
        Interrupted,
        Terminated,
    )
}

# Credentials that must never reach a terminal, a log or a results file.
_SECRET_PATTERNS = [
    # user:password@ in a URL (an endpoint, a proxy); the user name stays, the password goes
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]+):[^/\s@]+@"), r"\1:***@"),
    # pre-signed S3 / SigV4 query parameters
    (re.compile(r"(?i)\b(x-amz-(?:signature|credential|security-token)=)[^&\s\"']+"), r"\1***"),
    (re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"), r"\1***"),
    (re.compile(r"\bhf_[A-Za-z0-9]{16,}\b"), "hf_***"),
    (re.compile(r"\b(AKIA|ASIA)[A-Z0-9]{16}\b"), r"\1****************"),
    (
        re.compile(
            r"(?i)((?:aws_secret_access_key|aws_session_token|secret|password|token|api[_-]?key)"
            r"[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]{6,}"
        ),
        r"\1***",
    ),
]


def one_line(exc: BaseException) -> str:
    """An exception as one line: a pydantic ``ValidationError`` becomes its first problem and location."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            items = list(errors())
        except Exception:  # not pydantic's errors(): fall back to the text
            items = []
        if items and isinstance(items[0], dict):
            first = items[0]
            loc = ".".join(str(p) for p in first.get("loc", ()))
            more = f" (and {len(items) - 1} more problems)" if len(items) > 1 else ""
            msg = str(first.get("msg", "")).removeprefix("Value error, ")
            return f"{loc + ': ' if loc else ''}{msg}{more}"
    return " ".join(str(exc).split())


def printable(text: str) -> str:
    """``text`` safe for a terminal: control characters (escape sequences, bells, carriage returns) and the
    bidirectional overrides that reorder a line shown as escapes instead of acting on the terminal; newlines and
    tabs kept (``spectrn.sanitize.terminal``). Print it with markup off."""
    return terminal(text)


def redact(text: str) -> str:
    """Mask tokens, keys and passwords in ``text`` (used on every error shown to the user)."""
    for pattern, repl in _SECRET_PATTERNS:
        text = pattern.sub(repl, text)
    return text


# Query parameters whose values are credentials (matched on the lower-cased name, '-' read as '_').
_SECRET_QUERY_KEYS = re.compile(
    r"(?:^|_)(?:token|key|apikey|secret|password|passwd|pwd|signature|sig|credential|auth|authorization)(?:$|_)"
)


def redact_url(url: str) -> str:
    """``url`` fit to store or show: the password of ``user:password@`` becomes ``***`` (a bare ``token@``
    user, often a credential itself, too), credential-like query values become ``***``, and the path goes
    through ``redact``. Never raises: a string that does not parse as a URL is only ``redact``-ed.

    Used on every URL spectrn writes (``run.json`` endpoints, records' ``error_msg``, notes) or prints."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, hostport = netloc.rpartition("@")
            user, colon, _password = userinfo.partition(":")
            netloc = f"{user}:***@{hostport}" if colon else f"***@{hostport}"
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            if any(_SECRET_QUERY_KEYS.search(k.lower().replace("-", "_")) for k, _ in pairs):
                query = urlencode(
                    [(k, "***" if _SECRET_QUERY_KEYS.search(k.lower().replace("-", "_")) else v) for k, v in pairs],
                    safe="*",
                )
        return urlunsplit((parts.scheme, netloc, redact(parts.path), query, redact(parts.fragment)))
    except ValueError:  # not a URL (an invalid port, brackets): mask what the text patterns find
        return redact(url)
