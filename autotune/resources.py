"""Locate the data directories (templates/, search_spaces/) that ship with the package.

An installed package carries them inside `autotune/`; a source checkout keeps them at
the repository's top level.
"""

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def resource_path(directory: str, name: str) -> Path:
    for base in (_PACKAGE / directory, _PACKAGE.parent / directory):
        candidate = base / name
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"{directory}/{name} is missing from the installation")
