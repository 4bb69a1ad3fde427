"""Type stubs of mcdma._errors (generated at import from _mcdma.codes()).

tests/python/test_errors.py checks that this list matches the extension's.
"""

import enum
from typing import Dict, Optional, Type

class Code(enum.IntEnum):
    """mcdma status codes (mcdma::Code in status.hpp); OK is 0."""

    OK = 0
    INVALID = 1
    OUT_OF_RANGE = 2
    NOT_FOUND = 3
    PERMISSION_DENIED = 4
    ALREADY_EXISTS = 5
    NO_MEMORY = 6
    TIMEOUT = 7
    LINK_DOWN = 8
    PEER_GONE = 9
    REVOKED = 10
    CANCELLED = 11
    UNAVAILABLE = 12
    INTERNAL = 13
    BUSY = 14
    SYSTEM = 15

class Reason(enum.IntEnum):
    """mcdma reasons (mcdma::Reason in status.hpp); NONE is 0."""

    NONE = 0
    NO_SUCH_SERVICE = 1
    NOT_LINKED = 2
    KEY_FILE_MODE = 3
    KEY_FILE_OWNER = 4
    ACCESS_DENIED = 5
    KEY_FILE_LINK = 6
    PEER_IDENTITY = 7
    TRANSPORT_REFUSED = 8
    SHM_FULL = 9
    FD_LIMIT = 10
    BACKLOG_FULL = 11
    USER_QUOTA = 12
    NAME_RESERVED = 13
    HANDOFF_MANIFEST = 14
    HANDOFF_DIGEST = 15
    HANDOFF_EXPIRED = 16
    HANDOFF_REVOKED = 17
    HANDOFF_PRODUCER_GONE = 18
    HANDOFF_CHECKSUM = 19
    RAIL_END_DOWN = 20

class Error(Exception):
    """Base class of every mcdma error."""

    code: Code
    reason: Reason
    message: str
    def __init__(self, message: str = "", code: Optional[int] = None,
                 reason: Optional[int] = None) -> None: ...

class Invalid(Error): ...
class OutOfRange(Error): ...
class NotFound(Error): ...
class PermissionDenied(Error): ...
class AlreadyExists(Error): ...
class NoMemory(Error): ...
class Timeout(Error): ...
class LinkDown(Error): ...
class PeerGone(Error): ...
class Revoked(Error): ...
class Cancelled(Error): ...
class Unavailable(Error): ...
class Internal(Error): ...
class Busy(Error): ...
class System(Error): ...

ERRORS: Dict[int, Type[Error]]
__all__ = [
    "Code",
    "Reason",
    "Error",
    "error_from",
    "Invalid",
    "OutOfRange",
    "NotFound",
    "PermissionDenied",
    "AlreadyExists",
    "NoMemory",
    "Timeout",
    "LinkDown",
    "PeerGone",
    "Revoked",
    "Cancelled",
    "Unavailable",
    "Internal",
    "Busy",
    "System",
]

def error_from(code: int, message: str, reason: int = 0) -> Error: ...
