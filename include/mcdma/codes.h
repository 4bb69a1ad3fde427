/* The one list of mcdma status codes and reasons. C and C++ alike.
 *
 * Everything that names a code is made from MCDMA_CODE_LIST: mcdma::Code
 * (status.hpp), mcdma_code (mcdma.h), CodeName/CodeFromName, the Python
 * classes (mcdma.Code, mcdma.NotFound, ...) and the gRPC mapping. The
 * numbers are in the shared-memory protocol (completion entries, link
 * frames) and the C ABI: never renumber, only append. Values are dense from
 * 0; the last entry is the highest code (kMaxCode).
 *
 * X(NAME, value, CppName, meaning) */
#ifndef MCDMA_CODES_H_
#define MCDMA_CODES_H_

#define MCDMA_CODE_LIST(X)                                                       \
  X(OK, 0, kOk, "success")                                                       \
  X(INVALID, 1, kInvalid, "malformed request: bad opcode, bad argument")         \
  X(OUT_OF_RANGE, 2, kOutOfRange, "index, offset or length outside its segment") \
  X(NOT_FOUND, 3, kNotFound, "no such session, buffer, export or service")       \
  X(PERMISSION_DENIED, 4, kPermissionDenied, "bad token, access not granted")    \
  X(ALREADY_EXISTS, 5, kAlreadyExists, "name taken")                             \
  X(NO_MEMORY, 6, kNoMemory, "segment, arena or ring space exhausted")           \
  X(TIMEOUT, 7, kTimeout, "the deadline passed before completion")               \
  X(LINK_DOWN, 8, kLinkDown, "the link carrying the operation went down")        \
  X(PEER_GONE, 9, kPeerGone, "the serving or owning app/peer went away")         \
  X(REVOKED, 10, kRevoked, "the export was unexported or expired")               \
  X(CANCELLED, 11, kCancelled, "the operation was abandoned (session closing)")  \
  X(UNAVAILABLE, 12, kUnavailable, "daemon not reachable or draining")           \
  X(INTERNAL, 13, kInternal, "a bug or an unexpected system failure")            \
  X(BUSY, 14, kBusy, "a queue is full; retry later")                             \
  X(SYSTEM, 15, kSystem, "a system call failed (the message names it and errno)")

/* A reason refines a code where a program (not a person) must decide what
 * to do next: it is carried next to the code in completion events
 * (EventDesc::detail), link replies and gRPC status details. NONE where
 * the code says all there is. Same rules as codes: append only.
 *
 * X(NAME, value, CppName, meaning) */
#define MCDMA_REASON_LIST(X)                                                                     \
  X(NONE, 0, kNone, "no further detail")                                                         \
  X(NO_SUCH_SERVICE, 1, kNoSuchService,                                                          \
    "the service id names no service (unserved, or its app exited): look the name up again")     \
  X(NOT_LINKED, 2, kNotLinked, "the peer named is not linked to this daemon")                    \
  X(KEY_FILE_MODE, 3, kKeyFileMode, "the fabric key file is open to other users (chmod 600)")    \
  X(KEY_FILE_OWNER, 4, kKeyFileOwner, "the fabric key file belongs to another user")             \
  X(ACCESS_DENIED, 5, kAccessDenied,                                                             \
    "the operating system refused this user a file or socket (EACCES)")                          \
  X(KEY_FILE_LINK, 6, kKeyFileLink, "the fabric key path is a symbolic link")                    \
  X(PEER_IDENTITY, 7, kPeerIdentity,                                                             \
    "the peer's host id is not the one configured for it, or is this host's own")                \
  X(TRANSPORT_REFUSED, 8, kTransportRefused, "the peer does not offer the transport asked for")  \
  X(SHM_FULL, 9, kShmFull,                                                                       \
    "the shared-memory filesystem has no room for the segment (free /dev/shm or grow it)")       \
  X(FD_LIMIT, 10, kFdLimit, "the daemon is at its budget of open files (limits.max_open_files)") \
  X(BACKLOG_FULL, 11, kBacklogFull,                                                              \
    "the receiving app does not read its inbox: its queued events reached their budget")         \
  X(USER_QUOTA, 12, kUserQuota,                                                                  \
    "this user's budget of sessions, buffers or bytes is used up (limits.per_user_*)")           \
  X(NAME_RESERVED, 13, kNameReserved,                                                            \
    "the name is reserved for another user (names.reserve in the daemon's config)")              \
  X(HANDOFF_MANIFEST, 14, kHandoffManifest,                                                      \
    "a KV hand-off's manifest is not what the consumer expects (dtype, geometry, model)")        \
  X(HANDOFF_DIGEST, 15, kHandoffDigest, "a KV hand-off's token digest is another prompt's")      \
  X(HANDOFF_EXPIRED, 16, kHandoffExpired, "the KV hand-off's TTL passed")                        \
  X(HANDOFF_REVOKED, 17, kHandoffRevoked, "the producer revoked or closed the KV hand-off")      \
  X(HANDOFF_PRODUCER_GONE, 18, kHandoffProducerGone,                                             \
    "no producer serves the KV hand-off (it exited, or never offered it)")                       \
  X(HANDOFF_CHECKSUM, 19, kHandoffChecksum,                                                      \
    "a KV hand-off layer's bytes do not match the checksum its producer published")              \
  X(RAIL_END_DOWN, 20, kRailEndDown,                                                             \
    "the peer's end of the rail is not ready (interface not running, RDMA port not ACTIVE)")

#endif /* MCDMA_CODES_H_ */
