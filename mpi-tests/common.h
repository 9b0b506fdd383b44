// Shared by the MPI correctness programs: checks that abort the whole job on
// the first mismatch (a failing rank must not leave the others waiting), and
// data patterns that differ per sender, per size and per iteration so that a
// message delivered to the wrong buffer, or stale data, is caught.
#pragma once

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond, ...)                                               \
  do {                                                                 \
    if (!(cond)) {                                                     \
      int r_;                                                          \
      MPI_Comm_rank(MPI_COMM_WORLD, &r_);                              \
      fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", r_,       \
              __FILE__, __LINE__, #cond);                              \
      fprintf(stderr, __VA_ARGS__);                                    \
      fprintf(stderr, "\n");                                           \
      MPI_Abort(MPI_COMM_WORLD, 1);                                    \
    }                                                                  \
  } while (0)

#define CHECK_MPI(call) CHECK((call) == MPI_SUCCESS, "%s", #call)

// Byte i of a message from `src` tagged `seed`: not periodic in any power of
// two below 2^32, so shifted or truncated copies do not match by accident.
static inline uint8_t pattern(int src, uint64_t seed, size_t i) {
  uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)src << 40) ^ (seed * 0xBF58476D1CE4E5B9ull);
  x ^= x >> 29;
  return (uint8_t)(x ^ (x >> 17));
}

static inline void fill(uint8_t* buf, size_t len, int src, uint64_t seed) {
  for (size_t i = 0; i < len; ++i) buf[i] = pattern(src, seed, i);
}

// Index of the first byte that differs from the pattern, or -1.
static inline long verify(const uint8_t* buf, size_t len, int src, uint64_t seed) {
  for (size_t i = 0; i < len; ++i)
    if (buf[i] != pattern(src, seed, i)) return (long)i;
  return -1;
}

static inline void* xmalloc(size_t n) {
  void* p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "out of memory (%zu bytes)\n", n);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  return p;
}

// Printed by rank 0 once every rank got here: the wrappers look for it.
static inline void pass(const char* name) {
  MPI_Barrier(MPI_COMM_WORLD);
  int r, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (r == 0) printf("PASS %s np=%d\n", name, n);
}
