"""`python -m ledgerfold`: the same command line as the `ledgerfold` script (SPEC §14)."""

from __future__ import annotations

from ledgerfold._entry import main

if __name__ == "__main__":
    main(prog_name="ledgerfold")
