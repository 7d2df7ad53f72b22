"""Dependencies by audience: the library imports no CLI library, no Parquet
and no Dask; the command line is the `cli` extra, and without it the console script says in
one line how to install it (exit 2). Run in subprocesses, the second without site-packages
(`python -S`): only the package itself, as a wheel installed alone gives it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import ledgerfold

# The directory holding the `ledgerfold` package (the editable install's source tree).
PACKAGE_ROOT = str(Path(ledgerfold.__file__).resolve().parent.parent)
OPTIONAL = ("click", "rich", "pyarrow", "dask")


def _python(code: str, *, isolated: bool) -> subprocess.CompletedProcess[str]:
    flags = ["-S"] if isolated else []
    prelude = f"import sys; sys.path.insert(0, {PACKAGE_ROOT!r})\n" if isolated else ""
    return subprocess.run(
        [sys.executable, *flags, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


_IMPORTS = f"""
import sys
import ledgerfold
import ledgerfold.adapters
import ledgerfold.revalidate
import ledgerfold.store
import ledgerfold.summarizers
import ledgerfold.tokens
import ledgerfold.__main__
loaded = sorted({{name.split(".")[0] for name in sys.modules}} & set({OPTIONAL!r}))
print(",".join(loaded))
"""


def test_import_ledgerfold_leaves_the_optional_libraries_out() -> None:
    result = _python(_IMPORTS, isolated=False)  # where they are all installed
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


def test_the_library_imports_with_nothing_else_installed() -> None:
    result = _python(_IMPORTS, isolated=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


def test_without_click_the_script_says_how_to_install_it() -> None:
    result = _python(
        """
        from ledgerfold._entry import main
        main(["list", "ledger.db"])
        """,
        isolated=True,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0] == (
        "ledgerfold: the command line needs click and rich: pip install 'ledgerfold[cli]'"
    )


def test_with_click_the_script_runs_the_command_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ledgerfold", "list", str(tmp_path / "missing.db")],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    # The command line itself answered: its one-line user error, not the install hint.
    assert result.returncode == 2
    assert "ledgerfold[cli]" not in result.stderr
    assert "missing.db" in result.stderr


def test_the_console_script_is_the_entry_point() -> None:
    from importlib.metadata import entry_points

    (script,) = [ep for ep in entry_points(group="console_scripts") if ep.name == "ledgerfold"]
    assert script.value == "ledgerfold._entry:main"
