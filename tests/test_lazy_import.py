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


def test_a_library_that_fails_to_import_is_not_a_missing_name() -> None:
    """An AttributeError while the library imports (here a stale build of the extension,
    lacking a name a module reads from it) is an ImportError that says so: out of the
    package's `__getattr__` as it is, `from ledgerfold import Turn` said only "cannot
    import name 'Turn'" and `hasattr(ledgerfold, "Turn")` was False."""
    result = _python(
        """
        import ledgerfold._native as native
        del native.CHECK_REASONS  # as a build of the extension from before it
        import ledgerfold
        for use in ("from ledgerfold import Turn", "hasattr(ledgerfold, 'Turn')"):
            try:
                exec(use)
            except ImportError as error:
                print(type(error.__cause__).__name__, "CHECK_REASONS" in str(error))
            else:
                print("no error")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["AttributeError True"] * 2


def test_dir_lists_the_names_and_subpackages_from_the_first_call() -> None:
    """`dir()` (tab completion, `inspect.getmembers`) on a fresh import gives what the
    module has: the public names, `__all__` and the subpackages the library imported
    (`ledgerfold.store`, an attribute as before the import was lazy), the same every call."""
    result = _python(
        """
        import ledgerfold
        first = dir(ledgerfold)
        print(first == dir(ledgerfold), {"Turn", "__all__", "store", "adapters"} <= set(first))
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True"]


def test_a_name_set_on_the_module_stays_when_another_is_looked_up() -> None:
    """A name set on the module (an assignment before the first use, `mock.patch.object`
    after it) is not put back to the library's own by the lookup of another name, a
    missing one included."""
    result = _python(
        """
        from unittest import mock
        import ledgerfold
        ledgerfold.Turn = "assigned"
        print(ledgerfold.SQLiteStore.__name__, ledgerfold.Turn)
        del ledgerfold.Turn
        with mock.patch.object(ledgerfold, "SQLiteStore", "patched"):
            print(hasattr(ledgerfold, "no_such_name"), ledgerfold.SQLiteStore)
        print(ledgerfold.Turn.__name__, ledgerfold.SQLiteStore.__name__)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "SQLiteStore assigned",
        "False patched",
        "Turn SQLiteStore",
    ]


def test_first_uses_in_threads_at_once() -> None:
    """Threads making their first use at once (a public name, a subpackage, `dir`, `*`)
    each get the library: the imports they start wait for one another, none is given a
    partly imported module."""
    result = _python(
        """
        import threading
        import ledgerfold
        uses = [
            "from ledgerfold import Turn",
            "import ledgerfold.store",
            "import ledgerfold.adapters",
            "from ledgerfold import *",
            "dir(ledgerfold)",
            "ledgerfold.SQLiteStore",
        ]
        start = threading.Barrier(len(uses))
        failed = []
        def use(code):
            start.wait()
            try:
                exec(code, {"ledgerfold": ledgerfold})
            except BaseException as error:
                failed.append(f"{code}: {type(error).__name__}")
        threads = [threading.Thread(target=use, args=(code,)) for code in uses]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        print(failed, ledgerfold.Turn.__name__)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[] Turn"
