"""mcdma.Code and the mcdma.Error hierarchy, generated from libmcdma's codes.

Every status code of status.hpp (``mcdma::Code``) has one exception class,
named after the code in CamelCase: ``NOT_FOUND`` -> ``mcdma.NotFound``,
``TIMEOUT`` -> ``mcdma.Timeout``, ``OUT_OF_RANGE`` -> ``mcdma.OutOfRange``.
The list comes from the extension (``_mcdma.codes()``), so a code added in
C++ gets its class without a change here.
"""

from __future__ import annotations

import enum
from typing import Dict, Optional, Type

from . import _mcdma

#: Status codes, ``mcdma.Code.NOT_FOUND`` etc.; values match the C++ enum.
Code = enum.IntEnum("Code", _mcdma.codes(), module=__name__)  # type: ignore[misc]
Code.__doc__ = "mcdma status codes (mcdma::Code in status.hpp); OK is 0."

#: Reasons, ``mcdma.Reason.NO_SUCH_SERVICE`` etc.: what a program decides on
#: when the code alone is not enough (``Error.reason``); values match C++.
Reason = enum.IntEnum("Reason", _mcdma.reasons(), module=__name__)  # type: ignore[misc]
Reason.__doc__ = "mcdma reasons (mcdma::Reason in status.hpp); NONE is 0."


class Error(Exception):
    """Base class of every mcdma error.

    ``code`` is the :class:`Code`, ``message`` the daemon's or library's
    explanation, ``reason`` the :class:`Reason` (``Reason.NONE`` unless the
    code is refined, e.g. ``NOT_FOUND`` with ``Reason.NO_SUCH_SERVICE``).
    Decide on ``code`` and ``reason``, never on the message's text.
    ``str(err)`` reads ``"NOT_FOUND: no export named 'x'"``.

    A service handler (``Client.serve``) may raise any subclass, or ``Error``
    itself with ``code=``, to answer its caller with that code and message.
    """

    #: The code a subclass stands for; the base class defaults to INTERNAL.
    code: Code = Code.INTERNAL
    reason: Reason = Reason.NONE

    def __init__(self, message: str = "", code: Optional[int] = None,
                 reason: Optional[int] = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = Code(code)
        if reason is not None:
            self.reason = Reason(reason)

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}" if self.message else self.code.name

    def __reduce__(self):  # keeps the code through pickle (multiprocessing)
        return (type(self), (self.message, int(self.code), int(self.reason)))


def _class_name(code_name: str) -> str:
    return "".join(part.capitalize() for part in code_name.split("_"))


def _make_classes() -> Dict[int, Type[Error]]:
    classes: Dict[int, Type[Error]] = {}
    for code in Code:
        if code == Code.OK:
            continue
        name = _class_name(code.name)
        doc = f"mcdma error {code.name} (code {int(code)})."
        classes[int(code)] = type(name, (Error,), {"code": code, "__doc__": doc,
                                                   "__module__": "mcdma"})
    return classes


Error.__module__ = "mcdma"

#: Error class by numeric code.
ERRORS: Dict[int, Type[Error]] = _make_classes()
globals().update({cls.__name__: cls for cls in ERRORS.values()})

__all__ = ["Code", "Reason", "Error", "error_from", *(cls.__name__ for cls in ERRORS.values())]


def error_from(code: int, message: str, reason: int = 0) -> Error:
    """The exception instance for a (code, message, reason) status from libmcdma."""
    cls = ERRORS.get(code)
    if cls is None:  # cannot happen: the list and the library are one build
        return ERRORS[int(Code.INTERNAL)](f"unknown status code {code}: {message}")
    known = reason in Reason._value2member_map_  # a newer library's reason reads NONE
    return cls(message, reason=reason if known else int(Reason.NONE))


_mcdma._set_error_factory(error_from)
