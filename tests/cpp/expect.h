// The check macro of the C++ unit tests: EXPECT(cond) counts a check and,
// when cond is false, a failure, printed with its file and line; a test
// program exits 1 when g_failures is not 0.
#pragma once

#include <cstdio>

inline int g_failures = 0;
inline int g_checks = 0;

#define EXPECT(cond)                                                       \
  do {                                                                     \
    ++g_checks;                                                            \
    if (!(cond)) {                                                         \
      ++g_failures;                                                        \
      std::fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                      \
  } while (0)
