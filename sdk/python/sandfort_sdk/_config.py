"""Where a Client's server and credentials come from: the arguments, then ``SANDFORT_BASE_URL``
and ``SANDFORT_API_KEY``, then the ``sandfort`` CLI's stored login (``_cli_login``), whose key is
only sent to its own URL."""

from __future__ import annotations

import os
from typing import Optional, Tuple

from ._cli_login import config_path, same_server, stored_login
from ._transport import TokenProvider
from .errors import ConfigurationError

__all__ = ["resolve"]


def resolve(base_url: Optional[str], api_key: Optional[str],
            token_provider: Optional[TokenProvider]) -> Tuple[str, Optional[str], Optional[TokenProvider]]:
    """``(base_url, api_key, token_provider)`` to connect with, exactly one of the last two set;
    ConfigurationError when nothing says where or who."""
    base_url = base_url or os.environ.get("SANDFORT_BASE_URL")
    if token_provider is None:
        api_key = api_key or os.environ.get("SANDFORT_API_KEY")
    login = stored_login() if not base_url or not (api_key or token_provider) else None
    if not base_url:
        if login is None:
            raise ConfigurationError("no base_url given, SANDFORT_BASE_URL is not set and the sandfort CLI has "
                                     f"no stored login ({config_path() or 'HOME is not set'})")
        base_url = login.base_url
    if token_provider is not None:
        if api_key:
            raise ConfigurationError("give api_key or token_provider, not both")
        if not callable(token_provider):
            raise ConfigurationError("token_provider must be a callable returning a bearer token")
    elif not api_key:
        if login is None or not same_server(login.base_url, base_url):
            raise ConfigurationError(
                "no api_key (or token_provider) given, SANDFORT_API_KEY is not set and the sandfort CLI has no "
                "stored login " + ("for " + base_url if login is not None else f"({config_path() or 'HOME is not set'})"))
        if login.api_key:
            api_key = login.api_key
        else:
            token_provider = login.token_provider()
    return base_url, api_key, token_provider
