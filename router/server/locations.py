"""Where pinch-router keeps things on disk: its config file and its state directory.

Config lookup order: ``--config``, then ``$PINCH_ROUTER_CONFIG``, then
``./config.yaml``, then the per-user file (``$XDG_CONFIG_HOME/pinch-router/config.yaml``,
else ``~/.config/pinch-router/config.yaml``). A file named by the flag or the
variable must exist (a typo there is an error, not a reason to look further);
when nothing is found, the error lists every place looked at.

State (the decision log) lives in the state directory: ``--state-dir``, else
``$PINCH_ROUTER_STATE_DIR``, else ``$XDG_STATE_HOME/pinch-router``, else
``~/.local/state/pinch-router``. It is created owner-only (0700); a relative
``decision_log.path`` is placed inside it, an absolute one is used as written.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from router.config import Config
from router.observe.decision_log import open_owner_only

APP_DIR = "pinch-router"
CONFIG_ENV = "PINCH_ROUTER_CONFIG"
STATE_DIR_ENV = "PINCH_ROUTER_STATE_DIR"
CONFIG_NAME = "config.yaml"


class LocationError(Exception):
    """A file or directory pinch-router needs is missing or unusable; the message says which and why."""


def _home(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("HOME") or os.path.expanduser("~"))


def _xdg(environ: Mapping[str, str], variable: str, fallback: str) -> Path:
    value = environ.get(variable, "")
    # The XDG spec: a relative value is invalid and must be ignored.
    return Path(value) if value and os.path.isabs(value) else _home(environ) / fallback


def user_config_path(environ: Mapping[str, str]) -> Path:
    return _xdg(environ, "XDG_CONFIG_HOME", ".config") / APP_DIR / CONFIG_NAME


def find_config(flag: str | None, environ: Mapping[str, str], cwd: Path) -> Path:
    """The config file to use, by the lookup order in the module docstring."""
    for named, where in ((flag, "--config"), (environ.get(CONFIG_ENV), f"${CONFIG_ENV}")):
        if named:
            path = cwd / named
            if not path.is_file():
                raise LocationError(f"{named}: no such config file (from {where})")
            return path
    searched = [cwd / CONFIG_NAME, user_config_path(environ)]
    for path in searched:
        if path.is_file():
            return path
    looked = ", ".join(str(p) for p in searched)
    raise LocationError(
        f"no config file found (looked at --config, ${CONFIG_ENV}, {looked}); "
        "write one with `pinch-router init`"
    )


def state_dir(flag: str | None, environ: Mapping[str, str]) -> Path:
    """The state directory, by the order in the module docstring (not created here)."""
    named = flag or environ.get(STATE_DIR_ENV)
    if named:
        return Path(named).absolute()
    return _xdg(environ, "XDG_STATE_HOME", ".local/state") / APP_DIR


def place_state(config: Config, directory: Path) -> Config:
    """``config`` with ``decision_log.path`` made absolute: relative paths land in ``directory``."""
    path = config.decision_log.path
    if path == ":memory:" or os.path.isabs(path):
        return config
    placed = config.decision_log.model_copy(update={"path": str(directory / path)})
    return config.model_copy(update={"decision_log": placed})


def prepare_state(config: Config, directory: Path, *, probe_only: bool = False) -> None:
    """Create the state directory (owner-only) and check the decision log can be written there.

    Raises LocationError naming the path, the cause and the setting to change.
    ``probe_only`` (check-config, doctor): a database file the check had to create is removed again.
    """
    log = config.decision_log
    if not log.enabled or log.path == ":memory:":
        return
    database = Path(log.path)
    inside = directory == database.parent or directory in database.parents
    if inside:
        try:
            if not directory.is_dir():
                directory.mkdir(parents=True, mode=0o700)
                directory.chmod(0o700)  # mkdir's mode is narrowed by the umask, never widened; be exact
            database.parent.mkdir(parents=True, exist_ok=True, mode=0o700)  # a relative path's own folders
        except OSError as error:
            raise LocationError(
                f"cannot create the state directory {directory}: {error.strerror or error} (set --state-dir or ${STATE_DIR_ENV})"
            ) from None
    existed = database.exists()
    try:
        open_owner_only(database)
        if probe_only and not existed:
            database.unlink()
    except OSError as error:
        setting = f"--state-dir / ${STATE_DIR_ENV}" if inside else "decision_log.path"
        raise LocationError(f"cannot write the decision log {database}: {error.strerror or error} (set {setting})") from None
