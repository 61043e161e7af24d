"""README.md's "Use" block runs as written, on 2 ranks under ringrun."""

from __future__ import annotations

from pathlib import Path

from rank_groups import rank_environment, ringrun_command, run_command

REPO = Path(__file__).resolve().parents[2]


def use_block() -> str:
    section = (REPO / "README.md").read_text().split("\n## Use\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_use_block_runs_as_written(tmp_path):
    script = tmp_path / "use.py"
    script.write_text(use_block() + "print('USE-BLOCK-DONE')\n")
    done = run_command(ringrun_command(2, [str(script)]), rank_environment(), 120)
    assert done.returncode == 0, done.describe()
    assert done.stdout.count("USE-BLOCK-DONE") == 2, done.describe()
