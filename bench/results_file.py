"""What every benchmark writes with its figures: when, on what machine, with which versions, and
the file itself (bench/results/*.json)."""
from __future__ import annotations

import datetime
import json
import os
import platform


def machine(**extra) -> dict:
    return dict(platform=platform.platform(), processor=platform.processor() or platform.machine(),
                cpus=os.cpu_count(), python=platform.python_version(), **extra)


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def write(path: str, doc: dict, root: str | None = None) -> None:
    """doc as indented JSON at path (folders made); prints where."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote {os.path.relpath(os.path.abspath(path), root or os.getcwd())}")
