"""The `sandfort` CLI's stored login, read when a Client is given no URL or key (as Docker's and
kubectl's clients share their CLI's config).

The CLI keeps it in ``$XDG_CONFIG_HOME/sandfort/config.json``, else
``$HOME/.config/sandfort/config.json`` (mode 0600, cli/config.cpp): ``{"base_url", "api_key"}``
after ``sandfort login``, or ``{"base_url", "oidc": {"access_token", "expires_at", …}}`` after
``sandfort login --oidc``, whose access token the CLI renews in place. There are no profiles.
The secrets read here never appear in a message or a repr."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Callable, Optional

from .errors import ConfigurationError

# The CLI renews a token this long before it expires (cli/credentials.cpp): refuse it as late.
_EXPIRY_MARGIN_S = 30


def config_path() -> Optional[str]:
    xdg = os.environ.get("XDG_CONFIG_HOME")
    if xdg:
        return os.path.join(xdg, "sandfort", "config.json")
    home = os.environ.get("HOME")
    return os.path.join(home, ".config", "sandfort", "config.json") if home else None


def _read(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


@dataclass(frozen=True)
class StoredLogin:
    path: str
    base_url: str
    api_key: Optional[str]  # None for an OIDC sign-in
    oidc: bool

    def token_provider(self) -> Callable[[], str]:
        """The OIDC sign-in's access token, read from the file at each request (the CLI renews it)."""
        path = self.path

        def current_token() -> str:
            oidc = _read(path).get("oidc")
            token = oidc.get("access_token") if isinstance(oidc, dict) else None
            if not isinstance(token, str) or not token:
                raise ConfigurationError(f"the CLI's OIDC sign-in is gone from {path} (logged out?)")
            expires_at = oidc.get("expires_at")
            if isinstance(expires_at, (int, float)) and expires_at and time.time() + _EXPIRY_MARGIN_S >= expires_at:
                raise ConfigurationError("the access token of the CLI's OIDC sign-in has expired: run any "
                                         "`sandfort` command (e.g. `sandfort whoami`) to renew it, or give api_key")
            return token

        return current_token


def stored_login() -> Optional[StoredLogin]:
    """The CLI's login, or None when there is none (no file, not JSON, no URL, no credential)."""
    path = config_path()
    if path is None:
        return None
    data = _read(path)
    base_url = data.get("base_url")
    if not isinstance(base_url, str) or not base_url:
        return None
    api_key = data.get("api_key")
    if isinstance(api_key, str) and api_key:
        return StoredLogin(path, base_url, api_key, False)
    if isinstance(data.get("oidc"), dict):
        return StoredLogin(path, base_url, None, True)
    return None


def same_server(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")
