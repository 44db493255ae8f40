"""Run scripts of ``models/`` one after another in this process, as programs.

Usage: ``python tests/recipe_runner.py OUT_DIR NAME [NAME ...]``. Each script runs
as ``__main__`` with ``--quick --out OUT_DIR/NAME.json``; its stdout and stderr go
to ``OUT_DIR/NAME.stdout`` and ``OUT_DIR/NAME.stderr`` and its exit status (0, the
``SystemExit`` code, or 1 with the traceback on stderr) to ``OUT_DIR/NAME.status``.
One interpreter serves every script, so Python, JAX and the plotting stack are
imported once and programs two scripts share are compiled once.
"""

import contextlib
import runpy
import sys
import time
import traceback
from pathlib import Path

MODELS = Path(__file__).resolve().parents[1] / "models"


def run(name: str, out: Path) -> int:
    argv = sys.argv
    script, json_out = str(MODELS / f"{name}.py"), str(out / f"{name}.json")
    sys.argv = [script, "--quick", "--out", json_out]
    so, se = open(out / f"{name}.stdout", "w"), open(out / f"{name}.stderr", "w")
    with so, se:
        with contextlib.redirect_stdout(so), contextlib.redirect_stderr(se):
            try:
                runpy.run_path(sys.argv[0], run_name="__main__")
                code = 0
            except SystemExit as exc:
                code = exc.code
                if not isinstance(code, int):
                    code = int(code is not None)
            except BaseException:  # noqa: BLE001 - reported to the test, not raised
                traceback.print_exc()
                code = 1
    sys.argv = argv
    return code


if __name__ == "__main__":
    out_dir = Path(sys.argv[1])
    sys.path.insert(0, str(MODELS))  # the scripts import their shared _common
    for script in sys.argv[2:]:
        start = time.perf_counter()
        status = run(script, out_dir)
        (out_dir / f"{script}.status").write_text(str(status))
        (out_dir / f"{script}.seconds").write_text(f"{time.perf_counter() - start:.1f}")
    (out_dir / "runner.done").write_text("0")
