"""The one error type that means "the input is wrong".

Engines raise :class:`BadInput` with a message that names the field and the allowed values;
the CLI turns it into one line on stderr and exit code 2. Anything else is an internal failure
(exit code 1).
"""

from __future__ import annotations

import difflib
import errno


class BadInput(ValueError):
    """The user's input cannot be used; the message says which field and why.

    The message is always one line: control characters that reach it (a newline in a path or a
    value the user typed and the message quotes) are shown escaped."""

    def __str__(self) -> str:
        s = super().__str__()
        if s.isprintable():
            return s
        return "".join(c if c.isprintable() else repr(c)[1:-1] for c in s)


def close_matches(word: str, choices: list[str], n: int = 4) -> str:
    """A short ', '-joined list of the choices closest to ``word`` (for error messages)."""
    found = difflib.get_close_matches(word, choices, n=n, cutoff=0.4)
    if not found:
        found = [c for c in choices if word.lower() in c.lower()][:n]
    return ", ".join(found)


def require_positive(name: str, value: float, *, integer: bool = False) -> None:
    """Raise BadInput unless ``value`` is a positive number (and a whole one if ``integer``)."""
    if value is None or value <= 0:
        raise BadInput(f"{name} must be positive, got {value}")
    if integer and int(value) != value:
        raise BadInput(f"{name} must be a whole number, got {value}")


# operating-system errors that mean "this path from the user cannot be used"
_PATH_ERRNOS = {errno.ENAMETOOLONG, errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EACCES,
                errno.ELOOP, errno.EINVAL}


def as_bad_input(e: BaseException) -> BadInput | None:
    """A BadInput for errors that come from unusable user input (a path that is too long, a
    directory given as a file, bytes that are not UTF-8), else None (an internal failure)."""
    if isinstance(e, UnicodeDecodeError):
        return BadInput(f"an input file is not UTF-8 text ({e.reason} at byte {e.start})")
    if isinstance(e, OSError) and e.errno in _PATH_ERRNOS:
        name = str(e.filename or "")
        shown = name if len(name) <= 80 else name[:77] + "..."
        return BadInput(f"cannot use the path {shown!r}: {e.strerror}")
    return None
