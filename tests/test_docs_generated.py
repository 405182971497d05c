"""The evidence documents' generated blocks match the commands that print them (``benchmarks/regen_docs.py``).

Covered on every run: the blocks of ``calibration/VALIDATION.md`` and ``docs/validation.md`` (seconds) and one
what-if run (``whatif-C``: a full ``benchmarks/whatif_accuracy.py`` run with its sanity replays). The other
what-if blocks replay every trace of their bench runs, and the leave-one-preset-out block refits the profile
six times (minutes on a 2-core machine): they are checked under ``MOESIM_DOCS_ALL=1``, which ``.ci/run`` sets in
its third step.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load():
    spec = importlib.util.spec_from_file_location("regen_docs", ROOT / "benchmarks" / "regen_docs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("regen_docs", module)
    spec.loader.exec_module(module)
    return module


regen = _load()
FAST = [key for key, block in regen.BLOCKS.items() if block.doc != regen.WHATIF and not block.slow] + ["whatif-C"]


def _differences(ids: list[str], root: Path = ROOT) -> list[str]:
    return [doc for doc, (old, new) in regen.regenerate(ids, root).items() if old != new]


def test_every_block_is_in_its_document_once() -> None:
    for doc in {b.doc for b in regen.BLOCKS.values()}:
        found = [m["id"] for m in regen.BLOCK.finditer((ROOT / doc).read_text())]
        assert sorted(found) == sorted(k for k, b in regen.BLOCKS.items() if b.doc == doc), doc


def test_rewrite_touches_only_the_named_block_bodies() -> None:
    text = ("intro 1.0 %\n<!-- BEGIN GENERATED: a (old a) -->\nstale 2.0\n<!-- END GENERATED -->\nmiddle 3.0\n"
            "<!-- BEGIN GENERATED: b (cmd b) -->\nkept 4.0\n<!-- END GENERATED -->\n")
    out = regen.rewrite(text, {"a": "fresh 5.0\n"}, {"a": "cmd a"})
    assert out == text.replace("(old a)", "(cmd a)").replace("stale 2.0", "fresh 5.0")


def test_a_stale_figure_is_reported(tmp_path: Path) -> None:
    doc = tmp_path / regen.VALIDATION
    doc.parent.mkdir(parents=True)
    text = (ROOT / regen.VALIDATION).read_text()
    body = re.search(r"GENERATED: validate-fit \([^\n]*\) -->\n(.*?)<!--", text, re.S)[1]
    doc.write_text(text.replace(body, body.replace("×", "× 9", 1)))
    assert _differences(["validate-fit"], tmp_path) == [regen.VALIDATION]
    assert _differences(["validate-fit"]) == []


def test_cpu_blocks_match_their_commands() -> None:
    stale = _differences(FAST)
    assert not stale, f"{stale} differ from their commands: run python benchmarks/regen_docs.py"


@pytest.mark.skipif(os.environ.get("MOESIM_DOCS_ALL") != "1",
                    reason="minutes of trace replays: set MOESIM_DOCS_ALL=1 (.ci/run's third step does)")
def test_every_block_matches_its_command() -> None:
    stale = _differences(list(regen.BLOCKS))
    assert not stale, f"{stale} differ from their commands: run python benchmarks/regen_docs.py"
