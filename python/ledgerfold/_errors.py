"""The ledgerfold exception hierarchy (SPEC §10).

Every error carries a stable ``code``. Messages name fields and IDs, never turn bodies or
summary text, so they are safe to log.
"""

from __future__ import annotations

__all__ = [
    "ContextBudgetExceeded",
    "DuplicateId",
    "InvalidInput",
    "LedgerfoldError",
    "StoreError",
    "SummarizerError",
    "SummarizerTimeout",
]


class LedgerfoldError(Exception):
    """Base of every ledgerfold error."""

    code: str = "ledgerfold-error"


class InvalidInput(LedgerfoldError, ValueError):
    """A value broke a rule of SPEC §2 (or an argument rule of §4–§14).

    ``field`` names the offending field; ``problem`` says what kind of problem it is
    (``wrong-type``, ``empty``, ``out-of-range``, ``unknown-value``, ``not-utf8``,
    ``not-allowed``, ``duplicate``).
    """

    code = "invalid-input"

    def __init__(self, message: str, *, field: str | None = None, problem: str | None = None):
        super().__init__(message)
        self.field = field
        self.problem = problem

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (type(self), self.args, self.__dict__))


class DuplicateId(InvalidInput):
    """Two turns of one conversation share an ID."""

    code = "duplicate-id"

    def __init__(self, message: str, *, id: str, field: str = "id", problem: str = "duplicate"):
        super().__init__(message, field=field, problem=problem)
        self.id = id


class StoreError(LedgerfoldError):
    """The database failed; the call changed nothing. The sqlite error is chained."""

    code = "store-error"


class ContextBudgetExceeded(LedgerfoldError):
    """Protected turns plus the tail need more tokens than the budget allows."""

    code = "context-budget-exceeded"

    def __init__(self, needed: int, budget: int, protected: int):
        super().__init__(
            f"context needs {needed} tokens but the budget is {budget} "
            f"({protected} of them are protected turns, which are never dropped)"
        )
        self.needed = needed
        self.budget = budget
        self.protected = protected

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.needed, self.budget, self.protected))


class SummarizerError(LedgerfoldError):
    """A summarizer's model call failed: HTTP error, unreachable, or a malformed reply.

    The message names the server status or the problem, never turn or summary text.
    `status` is the HTTP status when the server answered with an error.
    """

    code = "summarizer-error"

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (type(self), self.args, self.__dict__))


class SummarizerTimeout(SummarizerError, TimeoutError):
    """The model did not answer within the timeout (also a `TimeoutError`, so the
    compactor reports `summarizer-timeout`)."""

    code = "summarizer-timeout"


def _rebuild(
    cls: type[LedgerfoldError], args: tuple[object, ...], state: dict[str, object]
) -> LedgerfoldError:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error
