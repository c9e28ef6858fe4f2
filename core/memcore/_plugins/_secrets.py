"""Which settings are secrets, so that they are never written into a memory.

A memory keeps the settings it was made with (``memcore.open(path=...)`` reopens it with
them), minus its secrets. A value is a secret when

- its component's config model says so: a name in ``ComponentConfig.secret_fields``, a
  ``SecretStr``/``SecretBytes`` field, or a field declared with
  ``Field(json_schema_extra={"secret": True})``;
- or, whatever the component (a plugin that forgot to mark it), its key names a secret
  (``password``, ``token``, ``api_key``, ``secret``...), or it is a URL carrying a password
  (``postgresql://user:pw@host/db``).

A ``<name>_env`` field holds the NAME of an environment variable (``api_key_env =
"OPENAI_API_KEY"``): that reference is kept, the value it points to is never read here.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, get_args
from urllib.parse import urlsplit

from pydantic import BaseModel, SecretBytes, SecretStr

__all__ = ["secret_field_names", "looks_secret", "url_has_password", "strip_secrets", "redact_urls"]

SECRET_KEY = re.compile(r"(?:^|_)(?:password|passwd|secret|token|api_?key|access_key|secret_key|private_key|credentials?)$", re.IGNORECASE)
"""Key names that hold a secret in any component (``api_key``, ``db_password``, ``token``)."""


def _secret_type(annotation: Any) -> bool:
    if isinstance(annotation, type) and issubclass(annotation, (SecretStr, SecretBytes)):
        return True
    return any(_secret_type(arg) for arg in get_args(annotation))


def secret_field_names(model: type[BaseModel] | None) -> frozenset[str]:
    """The fields of a config model that hold secrets (see the module docstring)."""
    if model is None:
        return frozenset()
    names = set(getattr(model, "secret_fields", ()))
    for name, info in model.model_fields.items():
        extra = info.json_schema_extra
        if (isinstance(extra, Mapping) and extra.get("secret")) or _secret_type(info.annotation):
            names.add(name)
    return frozenset(names)


def url_has_password(value: str) -> bool:
    """Whether ``value`` is a URL with a password in it (``scheme://user:pw@host``)."""
    try:
        parts = urlsplit(value)
        return bool(parts.scheme and parts.netloc and parts.password)
    except ValueError:
        return False


_URL_CREDENTIALS = re.compile(r"\b([a-z][a-z0-9+.\-]*://)([^:@\s/]*):[^@\s/]*@", re.IGNORECASE)
_PASSWORD_KEYWORD = re.compile(r"\b(password\s*=\s*)('[^']*'|\S+)", re.IGNORECASE)


def redact_urls(text: str) -> str:
    """``text`` with the password of every URL in it (``scheme://user:***@host``) and of
    every libpq ``password=...`` keyword replaced by ``***``: what a message may show."""
    return _PASSWORD_KEYWORD.sub(r"\1***", _URL_CREDENTIALS.sub(r"\1\2:***@", text))


def looks_secret(key: str, value: Any) -> bool:
    """A secret by its key or its value, whatever the component (``*_env`` references are not)."""
    if key.endswith("_env"):
        return False
    if SECRET_KEY.search(key) and value not in (None, "", False):
        return True
    return isinstance(value, (SecretStr, SecretBytes)) or (isinstance(value, str) and url_has_password(value))


def _strip(value: Any, where: str, omitted: list[str]) -> Any:
    if isinstance(value, Mapping):
        return strip_secrets(value, frozenset(), where, omitted)
    if isinstance(value, (list, tuple)):
        kept = []
        for i, item in enumerate(value):
            if isinstance(item, str) and url_has_password(item):
                omitted.append(f"{where}[{i}]")
                continue
            kept.append(_strip(item, f"{where}[{i}]", omitted))
        return kept
    return value


def strip_secrets(entry: Mapping[str, Any], secret: frozenset[str], location: str, omitted: list[str]) -> dict[str, Any]:
    """``entry`` without its secrets (``secret``: the names its config model marks), nested
    tables and lists included; the dotted place of each value left out is appended to
    ``omitted``."""
    out: dict[str, Any] = {}
    for key, value in entry.items():
        where = f"{location}.{key}" if location else str(key)
        if key in secret or looks_secret(str(key), value):
            if value is not None:
                omitted.append(where)
            continue
        out[key] = _strip(value, where, omitted)
    return out
