"""The house's rule (docs/design.md): remoting and namesrv are network peers and never import the
store, the broker or the native store code; remoting imports nothing of namesrv either."""

from __future__ import annotations

import ast
from pathlib import Path

import rocketstore.namesrv
import rocketstore.remoting

FORBIDDEN = {
    "remoting": ("rocketstore.store", "rocketstore.broker", "rocketstore._native", "rocketstore.namesrv",
                 "rocketstore.client", "rocketstore.message", "rocketstore.config"),
    # the .properties syntax namesrv.properties needs is in rocketstore.common
    "namesrv": ("rocketstore.store", "rocketstore.broker", "rocketstore._native", "rocketstore.client",
                "rocketstore.message", "rocketstore.config"),
}


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            if node.module == "rocketstore":
                names.update(f"rocketstore.{alias.name}" for alias in node.names)
    return names


def test_imports_only_go_downward() -> None:
    for package in (rocketstore.remoting, rocketstore.namesrv):
        folder = Path(package.__file__).parent
        forbidden = FORBIDDEN[folder.name]
        for path in sorted(folder.glob("*.py")):
            for name in imported_modules(path):
                assert not name.startswith(forbidden), f"{path.name} imports {name}"
