"""`import ledgerfold` imports next to nothing; the public names (`ledgerfold._public`) are
imported on the first use of one. Each check runs in a fresh interpreter (a subprocess), as
the first use there is the one that imports the library."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_import_ledgerfold_imports_neither_the_extension_nor_the_store() -> None:
    result = _python(
        """
        import sys
        import ledgerfold
        print(sorted(n for n in sys.modules if n.startswith("ledgerfold") or "sqlite" in n))
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['ledgerfold']"
