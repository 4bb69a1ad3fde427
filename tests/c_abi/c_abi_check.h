/* The checks the C ABI tests share: CHECK records a failure (with the
 * library's last error) and goes on, so one run reports every failure; a
 * test's main returns FINISH(name); sleep_ms waits for a callback. Plain
 * C99 plus POSIX nanosleep. */
#ifndef MCDMA_TESTS_C_ABI_CHECK_H_
#define MCDMA_TESTS_C_ABI_CHECK_H_

#include <stdio.h>
#include <time.h>

#include "mcdma/mcdma.h"

static int failures = 0;

#define CHECK(cond, ...)                                          \
  do {                                                            \
    if (!(cond)) {                                                \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);        \
      fprintf(stderr, __VA_ARGS__);                               \
      fprintf(stderr, " (last error: %s)\n", mcdma_last_error()); \
      failures++;                                                 \
    }                                                             \
  } while (0)

/* nanosleep is POSIX: the targets define _POSIX_C_SOURCE, as strict C hides it. */
static inline void sleep_ms(long ms) {
  struct timespec t;
  t.tv_sec = ms / 1000;
  t.tv_nsec = (ms % 1000) * 1000000L;
  nanosleep(&t, NULL);
}

#define FINISH(name)                                            \
  (failures == 0 ? (printf("%s: all checks passed\n", name), 0) \
                 : (fprintf(stderr, "%s: %d failures\n", name, failures), 1))

#endif /* MCDMA_TESTS_C_ABI_CHECK_H_ */
