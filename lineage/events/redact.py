"""Secrets in OpenLineage events, found and replaced before anything is stored: the rules as data.

Producers put credentials into events all the time (Spark properties, JDBC URLs, JAAS configurations,
error messages, URIs with ``user:password@``). A lineage store that keeps them becomes the place an
attacker reads them from, so every message is redacted before it is written anywhere: by the streaming
ingestion (:func:`lineage.transforms.envelope.redact_messages`) and by the HTTP intake before it produces
to Kafka (:func:`redact_many`). Both run this module's Python code, after pyarrow's one-pass search for
the literals the rules need (:meth:`Redactor.literal_gate`, :func:`flagged`) has picked the few messages
that may hold a secret: the ingestion in a Spark Arrow UDF, the intake on the events of each request. The
rules are one regular expression, still written in the syntax Java's ``java.util.regex`` and Python's
``re`` share (no ``\\s``/``\\w``/``\\b``, whose Unicode meaning differs; scoped ``(?i:...)`` flags;
fixed-width look-behinds only), so that any engine of the platform can apply them.

How a rule is written: exactly one capturing group, the *kept prefix*, then the secret itself; what
follows the secret is a look-ahead. The match is replaced by the prefix and :data:`MARKER`. So
``postgres://alice:pw@db`` becomes ``postgres://alice:***REDACTED***@db``, and in JSON only the content of
a string is replaced: the event stays valid JSON, and the fields validation needs are never touched.

Secrets never match at a value that already is the marker (or an allow-listed value), so redacting twice
changes nothing: the intake's redaction and the ingestion's compose.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:  # pyarrow is imported where it is used: the CLI's and the jobs' imports stay light
    import pyarrow as pa

MARKER = "***REDACTED***"

# Words that make a property, parameter or header name secret (case-insensitive, anywhere in the name).
SECRET_WORDS = (
    "password",
    "passwd",
    "passphrase",
    "pwd",
    "secret",
    "token",
    "jaas",
    "credential",
    "api[_.-]?key",
    "apikey",
    "access[_.-]?key",
    "private[_.-]?key",
    "signature",
    "[._-]key",  # spark.hadoop.fs.s3a.access.key, fs.azure.account.key.<account>..., sasl.key
)
_WORDS = "|".join(SECRET_WORDS)

# Characters of a name (property key, parameter name) around a secret word.
_NAME = "[A-Za-z0-9_.-]"
# Where an unquoted secret value ends: whitespace, a JSON quote or escape, a separator.
_VALUE = "[^ \\t\\r\\n\"'\\\\&;,#<>]"
_WS = "[ \\t]*"
# JSON's '=' and '&' as some serializers (Gson) escape them.
_EQ = "(?:=|\\\\u003[dD])"
# The triggers (:class:`Rule`) are searched in the lower-cased text and each starts with a literal:
# regular-expression engines jump to a leading literal, while an alternation at the front is tried at
# every position (that cost several times the rest of the ingestion). Lowering maps at most one character
# to two (U+0130), so a span of n characters in the text is at most 2n in the lowered text.
# The literals every secret word holds (SECRET_WORDS: "pass" for password/passwd/passphrase, "key" for
# every *key).
_WORD_LITERALS = ("pass", "pwd", "secret", "token", "jaas", "credential", "key", "signature")
# After a word's literal (up to six more letters of the word: "pass" of "passphrase"), what each word rule
# needs: a JSON key with a string value or followed by a "value" member (json_property, json_name_value:
# up to 200 characters to the key's end, 412 lowered), or a name then = or : (key_value: up to 100 more
# name characters, ASCII, which lowering keeps).
_WORD_TAIL = '(?:[^"\\\\]{0,420}"[ \\t]*[:,]|[a-z0-9_.-]{0,110}[ \\t]*(?:=|\\\\u003d|:))'
# Tokens recognisable by their form: GitHub, GitLab, Slack, Google API, Stripe live keys, JWTs.
_TOKENS = (
    "(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|glpat-[A-Za-z0-9_-]{20,}"
    "|xox[abpors]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{35}|[sr]k_live_[0-9A-Za-z]{16,}"
    "|eyJ[A-Za-z0-9_-]{8,}\\.eyJ[A-Za-z0-9_-]{8,}\\.[A-Za-z0-9_-]{8,})"
)


@dataclass(frozen=True)
class Trigger:
    """A cheap search for what a rule needs, in the lower-cased text.

    ``needs`` are groups of literals, and every match of ``pattern`` holds one literal of each group: a
    text that lacks all the literals of a group is not searched with ``pattern`` at all (a substring test
    is cheaper than a regular-expression search, and most texts hold none of the literals). The first
    groups of all triggers are what the ingestion looks for in one pass (:meth:`Redactor.literal_gate`).
    """

    pattern: str
    needs: tuple[tuple[str, ...], ...]

    def finds(self, lowered: str) -> bool:
        return all(any(lit in lowered for lit in group) for group in self.needs) and bool(
            _compiled(self.pattern).search(lowered)
        )


def _led(literal: str, rest: str = "") -> Trigger:
    """A trigger led by ``literal`` (which its match holds), then ``rest``."""
    return Trigger(re.escape(literal) + rest, ((literal,),))


def _spelled(*names: str) -> tuple[str, ...]:
    """``name=`` for each name, with = as itself or as a JSON serializer may escape it (\\u003d)."""
    return tuple(n + eq for n in names for eq in ("=", "\\u003d"))


@dataclass(frozen=True)
class Rule:
    """One kind of secret: ``pattern`` has one capturing group (kept) followed by the secret."""

    name: str
    pattern: str
    example: str  # a string the rule redacts (checked by the unit tests)
    # Every match of ``pattern`` is found by one of them (in the lower-cased text), so a text none of
    # them finds is not searched in full.
    triggers: tuple[Trigger, ...] = ()


_WORD_TRIGGERS = tuple(_led(w, _WORD_TAIL) for w in _WORD_LITERALS)
_AWS_PREFIXES = ("akia", "asia", "agpa", "aida", "aroa", "aipa", "anpa", "anva")


def _rules(allow: str) -> tuple[Rule, ...]:
    """The built-in rules; ``allow`` is a look-ahead that refuses a secret position (marker, allow-list)."""
    return (
        Rule(
            "private_key_pem",
            # The body of a PEM private key (in JSON its newlines are \n escapes); the armour lines stay.
            "(-----BEGIN [A-Z ]{0,20}PRIVATE KEY-----)"
            + f"(?!{re.escape(MARKER)}-----END)"
            + '(?:[^"-]|-(?!----END))+',
            "-----BEGIN RSA PRIVATE KEY-----\\nMIIEow\\n-----END RSA PRIVATE KEY-----",
            (_led("private key-----"),),
        ),
        Rule(
            "uri_userinfo",
            # scheme://user:password@host -> the password (the user stays, so the name still says who).
            # (a scheme starts a word: without the look-behind every letter would be tried as its start)
            '((?<![A-Za-z0-9+.-])(?i:[a-z][a-z0-9+.-]{0,30})://[^:/?#@ \\t\\r\\n"\\\\]{0,200}:)'
            + allow
            + '[^@/?# \\t\\r\\n"\\\\]{1,500}(?=@)',
            "postgres://user:pw@host:5432",
            # user and password: at most 701 characters, 1,402 lowered. "@" first: rarer than "://".
            (Trigger('://[^/?#@ \\t\\r\\n"\\\\]{0,1500}@', (("@",), ("://",))),),
        ),
        Rule(
            "jdbc_oracle_userinfo",
            # jdbc:oracle:thin:scott/tiger@host:1521/orcl
            '((?i:jdbc:oracle:[a-z]{1,10}:)[^/:@ \\t\\r\\n"\\\\]{1,200}/)'
            + allow
            + '[^@ \\t\\r\\n"\\\\]{1,500}(?=@)',
            "jdbc:oracle:thin:scott/tiger@db:1521/orcl",
            (_led("jdbc:oracle:"),),
        ),
        Rule(
            "json_property",
            # "<secret-named key>": "<value>" -> the string's content (Spark properties, facets, options).
            # The look-ahead first: only a key with a string value is searched for a secret word (cheap).
            '("(?=[^"\\\\]{0,200}"[ \\t]*:[ \\t]*")'
            + _NAME_ALLOW
            + '[^"\\\\]{0,200}(?i:'
            + _WORDS
            + ')[^"\\\\]{0,200}"'
            + _WS
            + ":"
            + _WS
            + '")'
            + allow
            + '(?:[^"\\\\]|\\\\.)+(?=")',
            '{"spark.hadoop.fs.s3a.secret.key": "abc"}',
            _WORD_TRIGGERS,
        ),
        Rule(
            "json_name_value",
            # {"name": "<secret-named key>", "value": "<value>"}: properties as a list of pairs.
            '("(?:name|key)"'
            + _WS
            + ":"
            + _WS
            + '"'
            + _NAME_ALLOW
            + '[^"\\\\]{0,200}(?i:'
            + _WORDS
            + ')[^"\\\\]{0,200}"'
            + _WS
            + ","
            + _WS
            + '"value"'
            + _WS
            + ":"
            + _WS
            + '")'
            + allow
            + '(?:[^"\\\\]|\\\\.)+(?=")',
            '{"name": "db.password", "value": "pw"}',
            _WORD_TRIGGERS,
        ),
        Rule(
            "authorization_header",
            # Authorization: Bearer x / "Authorization": "Basic x" / authorization=x
            "((?i:(?:proxy-)?authorization)(?:\\\\?[\"'])?"
            + _WS
            + "[:=]"
            + _WS
            + "(?:\\\\?[\"'])?"
            + _WS
            + "(?:(?i:bearer|basic|token|digest|negotiate)[ \\t]{1,10})?)"
            + allow
            + "(?!(?i:bearer|basic|token|digest|negotiate)[ \\t])"  # the scheme word is never the secret
            + _VALUE
            + "+",
            "Authorization: Bearer eyJhbGciOi",
            (_led("authorization"),),
        ),
        Rule(
            "bearer_token",
            # A bearer token anywhere in free text (error messages, logs).
            "((?<![A-Za-z0-9_])(?i:bearer)[ \\t]{1,10})" + allow + "[A-Za-z0-9._~+/-]{8,}=*",
            "request failed: Bearer abcdef123456",
            (_led("bearer", "[ \\t]"),),
        ),
        Rule(
            "key_value",
            # <secret-named key>=<value> in query strings, JDBC URLs, JAAS configs, free text:
            # ?password=x, ;password=x, password="x" (JAAS, as \"x\" inside JSON), secret.key: x.
            "((?<![A-Za-z0-9_.-])"
            # Cheap test first: a name followed by = or : (most words of a text are not).
            + f"(?={_NAME}{{1,100}}{_WS}(?:{_EQ}|:(?![/:])))"
            + _NAME_ALLOW
            + _NAME
            + "{0,100}(?i:"
            + _WORDS
            + ")"
            + _NAME
            + "{0,100}"
            + _WS
            + "(?:"
            + _EQ
            + "|:(?![/:]))"
            + _WS
            + "(?:\\\\?[\"'])?)"
            + allow
            + _VALUE
            + "+",
            "jdbc:mysql://db/x?user=u&password=pw",
            _WORD_TRIGGERS,
        ),
        Rule(
            "user_parameter",
            # user=/username= as a URL or JDBC parameter (the brief's "JDBC URL password=/user= params").
            "((?:[?&;]|\\\\u0026)(?i:user|username|user_name|uid)" + _EQ + ")" + allow + _VALUE + "+",
            "jdbc:sqlserver://db;user=sa;password=pw",
            (
                Trigger("user(?:name|_name)?(?:=|\\\\u003d)", (_spelled("user", "username", "user_name"),)),
                Trigger("uid(?:=|\\\\u003d)", (_spelled("uid"),)),
            ),
        ),
        Rule(
            "aws_access_key_id",
            "((?<![A-Z0-9]))" + allow + "(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA)[A-Z0-9]{16}(?![A-Z0-9])",
            "AKIAIOSFODNN7EXAMPLE",
            (Trigger("a(?:kia|sia|gpa|ida|roa|ipa|npa|nva)[a-z0-9]{16}", (_AWS_PREFIXES,)),),
        ),
        Rule(
            "well_known_token",
            "((?<![A-Za-z0-9_-]))" + allow + _TOKENS,
            "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB",
            (
                Trigger(
                    "gh(?:[pousr]_[a-z0-9]{30,}|ithub_pat_[a-z0-9_]{30,})",
                    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),),
                ),
                _led("glpat-", "[a-z0-9_-]{20,}"),
                _led("xox", "[abpors]-[a-z0-9-]{10,}"),
                _led("aiza", "[0-9a-z_-]{35}"),
                _led("k_live_", "[0-9a-z]{16,}"),
                _led("eyj", "[a-z0-9_-]{8,}\\.eyj"),
            ),
        ),
    )


# Placeholder replaced by the allow-listed key names (a negative look-ahead) in the rules above.
_NAME_ALLOW = "\x00NAME_ALLOW\x00"


@dataclass(frozen=True)
class Redactor:
    """A compiled rule set: the built-in rules, extra patterns and the allow-lists of the settings.

    Attributes:
        pattern: the one regular expression both engines apply (Java and Python syntax alike).
        groups: how many capturing groups it has (one kept prefix per rule).
    """

    pattern: str
    groups: int
    # Searched in the lower-cased text (each rule's triggers), and in the text as it is (the extra
    # patterns): a text none of them finds holds no secret and is not searched with ``pattern``.
    triggers: tuple[Trigger, ...] = ()
    extra_triggers: tuple[str, ...] = ()

    def might_hold_secrets(self, text: str) -> bool:
        if not self.triggers and not self.extra_triggers:
            return True
        lowered = text.lower()
        return any(t.finds(lowered) for t in self.triggers) or any(
            _compiled(t).search(text) for t in self.extra_triggers
        )

    def literal_gate(self) -> str | None:
        """A pattern for pyarrow's engine (RE2) that finds, ignoring case, a literal every trigger needs.

        One pass over the text for all the literals, where searching them one by one costs a pass each.
        A text it does not find holds no secret: every trigger needs one literal of its first group, and
        RE2's case folding (on UTF-8 text) covers what lower-casing maps to these ASCII literals (the
        Kelvin sign to ``k`` included). ``None`` when extra patterns are configured: they are regular
        expressions of any form, with no literal to look for.
        """
        if self.extra_triggers or not self.triggers:
            return None
        literals = sorted({lit for t in self.triggers for lit in t.needs[0]})
        # A name spelled with \\u escapes may hide every literal ("p\\u0061ss"): such texts go through.
        return "(?i)(?:" + "|".join([*(_re2_literal(lit) for lit in literals), ESCAPED_NAME_CHAR]) + ")"

    def redact(self, text: str) -> tuple[str, int]:
        """``text`` with every secret replaced by :data:`MARKER`, and how many were replaced.

        The rules read names as JSON decodes them: where a JSON string spells a letter, digit, ``.``,
        ``-`` or ``_`` as a ``\\u`` escape (``"db.pass\\u0077ord"``), the text with those escapes
        decoded (:func:`decode_name_escapes`, the same JSON) is redacted instead when that finds more.
        """
        redacted, count = self._redact(text)
        if _ESCAPED_NAME_CHAR.search(text) is not None:
            decoded, more = self._redact(decode_name_escapes(text))
            if more > count:
                return decoded, more
        return redacted, count

    def _redact(self, text: str) -> tuple[str, int]:
        if not self.might_hold_secrets(text):
            return text, 0
        compiled = _compiled(self.pattern)
        count = 0

        def _replace(match: re.Match[str]) -> str:
            nonlocal count
            count += 1
            return "".join(g for g in match.groups() if g) + MARKER

        return compiled.sub(_replace, text), count


# A JSON \\u escape of a character names are made of (ASCII letters and digits, ``-``, ``.``, ``_``), in
# the syntax Python's re and RE2 share. Hex digits of either case; (?i) is not used: it would also take \\U.
ESCAPED_NAME_CHAR = "\\\\u00(?:[46][1-9a-fA-F]|[57][0-9aA]|3[0-9]|2[deDE]|5[fF])"
_ESCAPED_NAME_CHAR = re.compile(ESCAPED_NAME_CHAR)
# A JSON string token: where an escape of a name character is decoded (never outside strings, so a text
# that is not JSON does not become JSON).
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def decode_name_escapes(text: str) -> str:
    """``text`` with every \\u escape of a name character inside a JSON string written as the character.

    The JSON value is the same (a string's characters do not change, nor does any other token), so the
    event's verdict is too; an escaped quote, backslash or control character is left as it is.
    """

    def _string(match: re.Match[str]) -> str:
        token = match.group(0)
        return _STRING_ESCAPE.sub(_decoded, token) if "\\u" in token else token

    return _JSON_STRING.sub(_string, text)


# One escape of a JSON string, consumed left to right (so "\\\\u0077", an escaped backslash then
# "u0077", is not taken for an escape of "w").
_STRING_ESCAPE = re.compile(r"\\(?:u00([0-9a-fA-F]{2})|.)", re.DOTALL)
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._")


def _decoded(match: re.Match[str]) -> str:
    code = match.group(1)
    if code is not None and chr(int(code, 16)) in _NAME_CHARS:
        return chr(int(code, 16))
    return match.group(0)


def _re2_literal(literal: str) -> str:
    """``literal`` as an RE2 pattern (RE2 takes a backslash before any punctuation, not before a space)."""
    return "".join(f"\\{c}" if c in "\\.^$|?*+()[]{}" else c for c in literal)


_CACHE: dict[str, re.Pattern[str]] = {}


def _compiled(pattern: str) -> re.Pattern[str]:
    if pattern not in _CACHE:
        _CACHE[pattern] = re.compile(pattern)
    return _CACHE[pattern]


def _check_pattern(pattern: str, what: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"{what} {pattern!r} is not a valid regular expression: {exc}") from None


def build_redactor(
    extra_patterns: Sequence[str] = (),
    allow_values: Sequence[str] = (),
    allow_keys: Sequence[str] = (),
) -> Redactor:
    """Compile the rules with the settings' additions.

    Args:
        extra_patterns: more secrets, regular expressions; the whole match is redacted, or, with one
            capturing group, what follows the group (the group is kept).
        allow_values: regular expressions of values that are never redacted (placeholders such as
            ``\\$\\{env:[A-Z_]+\\}``); one must match the whole value, up to where the value ends.
        allow_keys: regular expressions of property/parameter names that are not secrets although their
            name contains a secret word (``kafka\\.key\\.serializer``); matched against the whole name.

    Raises:
        ValueError: a pattern does not compile or an extra pattern has more than one capturing group.
    """
    for what, patterns in (("redact.allow_values", allow_values), ("redact.allow_keys", allow_keys)):
        for p in patterns:
            if _check_pattern(p, f"{what} entry").groups:
                raise ValueError(f"{what} entry {p!r} has a capturing group; use (?:...)")
    ends = "(?![^ \\t\\r\\n\"'\\\\&;,@#])"  # the value ends here (a terminator or the end of the text)
    refused = [re.escape(MARKER), *[f"(?:{p})" for p in allow_values]]
    allow = f"(?!(?:{'|'.join(refused)}){ends})"
    name_allow = f'(?!(?:{"|".join(f"(?:{p})" for p in allow_keys)})["=: \\t])' if allow_keys else ""
    rules = _rules(allow)
    parts = [r.pattern.replace(_NAME_ALLOW, name_allow) for r in rules]
    for p in extra_patterns:
        compiled = _check_pattern(p, "redact.extra_patterns entry")
        if compiled.groups > 1:
            raise ValueError(f"redact.extra_patterns entry {p!r} has more than one capturing group")
        parts.append(p if compiled.groups else f"(){allow}(?:{p})")
    pattern = "|".join(f"(?:{p})" for p in parts)
    groups = _check_pattern(pattern, "the combined redaction pattern").groups
    triggers = tuple(dict.fromkeys(t for r in rules for t in r.triggers))
    for t in triggers:
        _check_pattern(t.pattern, "a redaction trigger")
    extra_triggers = tuple(f"(?:{p})" for p in extra_patterns)
    return Redactor(pattern, groups, triggers, extra_triggers)


def builtin_rules() -> tuple[Rule, ...]:
    """The built-in rules as compiled in the default :class:`Redactor` (for tests and docs)."""
    default = f"(?!{re.escape(MARKER)}(?![^ \\t\\r\\n\"'\\\\&;,@#]))"
    return tuple(
        Rule(r.name, r.pattern.replace(_NAME_ALLOW, ""), r.example, r.triggers) for r in _rules(default)
    )


DEFAULT = build_redactor()


def redact_text(text: str, redactor: Redactor = DEFAULT) -> tuple[str, int]:
    """Shorthand for ``redactor.redact(text)``."""
    return redactor.redact(text)


def redact_bytes(value: bytes, redactor: Redactor = DEFAULT) -> tuple[bytes, int]:
    """Redact a message, and count what was replaced.

    Bytes that are not valid UTF-8 are read leniently: each byte that is not part of a UTF-8 character
    stands for itself (Python's ``surrogateescape``), the rules run on that text and the bytes are written
    back as they came, the secrets apart. So a secret in a message with one broken byte (or in Latin-1 or
    another ASCII-based encoding) is replaced all the same, and everything else stays byte for byte (the
    message is still refused as ``NOT_UTF8``). UTF-16 and UTF-32 texts are not read.
    """
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        lenient = value.decode("utf-8", "surrogateescape")
        redacted, count = redactor.redact(lenient)
        return (redacted.encode("utf-8", "surrogateescape"), count) if count else (value, 0)
    redacted, count = redactor.redact(text)
    return (redacted.encode("utf-8"), count) if count else (value, 0)


def flagged(values: pa.Array, redactor: Redactor = DEFAULT) -> list[int]:
    """Positions of the values (binary) in which some trigger may find a secret: one pass of pyarrow's RE2
    over each value for every literal of :meth:`Redactor.literal_gate` (each non-null value when there is
    no gate). Values that are not UTF-8 are searched as bytes (RE2 reads an invalid byte as a character of
    its own), and :func:`redact_bytes` reads them leniently."""
    import pyarrow as pa
    import pyarrow.compute as pc

    gate = redactor.literal_gate()
    if gate is None:
        found = pc.is_valid(values)
    else:
        # UTF-8 text for RE2's Unicode case folding (unchecked: the bytes are only searched).
        text = pa.large_string() if pa.types.is_large_binary(values.type) else pa.string()
        found = pc.match_substring_regex(values.cast(text, safe=False), gate)
    indices: list[int] = pc.indices_nonzero(pc.fill_null(found, False)).to_pylist()
    return indices


# pyarrow compiles the gate for each call (about 0.1 ms), where the rules' own triggers cost about 45 us
# for a 1.7 KB event: fewer values than this go through the triggers one by one.
GATE_MIN_VALUES = 8


def redact_many(values: Sequence[bytes], redactor: Redactor = DEFAULT) -> list[tuple[bytes, int]]:
    """:func:`redact_bytes` of every value, the rules applied only to the values :func:`flagged` picks
    (one by one for fewer than :data:`GATE_MIN_VALUES` values)."""
    import pyarrow as pa

    if len(values) < GATE_MIN_VALUES:
        return [redact_bytes(value, redactor) for value in values]
    out = [(value, 0) for value in values]
    for i in flagged(pa.array(values, pa.binary()), redactor):
        out[i] = redact_bytes(values[i], redactor)
    return out


def count_markers(text: str) -> int:
    """How many values of ``text`` are redacted (markers), whoever redacted them."""
    return text.count(MARKER)


def without_credentials(uri: str) -> str:
    """An address fit to publish as a namespace: no ``user:password@``, no query or fragment (where JDBC
    URLs and presigned URLs carry credentials), and whatever else the rules find redacted."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return redact_text(uri)[0]
    netloc = parts.netloc.rpartition("@")[2]
    cleaned = urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    if "?" in parts.path or not cleaned:  # opaque forms urlsplit does not take apart (jdbc:...)
        cleaned = uri.split("?", 1)[0]
    return redact_text(cleaned)[0]
