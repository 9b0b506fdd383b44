// Shared by the OSU-style benchmarks: options, buffers, the size loop and
// the output format of the OSU micro-benchmarks (a '#' header, then one
// "size value" line per message size), so that tables and plots can be
// made the same way for every transport. Our own code, not OSU's.
//
// Options: -m [min:]max  message sizes (powers of two from min, default 0 or 1)
//          -i iters      iterations for sizes <= 8 KiB (default per benchmark)
//          -I iters      iterations for larger sizes
//          -x warmup     warm-up iterations (a tenth of -i/-I unless given)
//          -w window     messages in flight per iteration (bandwidth, rate)
#pragma once

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  size_t min, max;
  int iters_small, iters_large, warmup;  // warmup < 0: a tenth of the iterations
  int window;
} BenchOpts;

static int bench_rank, bench_size;

static inline void bench_usage(const char* prog) {
  if (bench_rank == 0)
    fprintf(stderr, "usage: %s [-m [min:]max] [-i iters] [-I iters_large] [-x warmup] [-w window]\n",
            prog);
  MPI_Finalize();
  exit(1);
}

static inline void bench_init(int* argc, char*** argv, BenchOpts* o) {
  MPI_Init(argc, argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &bench_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &bench_size);
  int c;
  while ((c = getopt(*argc, *argv, "m:i:I:x:w:")) != -1) {
    switch (c) {
      case 'm': {
        char* colon = strchr(optarg, ':');
        if (colon) {
          o->min = strtoull(optarg, NULL, 0);
          o->max = strtoull(colon + 1, NULL, 0);
        } else {
          o->max = strtoull(optarg, NULL, 0);
        }
        break;
      }
      case 'i': o->iters_small = atoi(optarg); break;
      case 'I': o->iters_large = atoi(optarg); break;
      case 'x': o->warmup = atoi(optarg); break;
      case 'w': o->window = atoi(optarg); break;
      default: bench_usage((*argv)[0]);
    }
  }
}

static inline int bench_iters(const BenchOpts* o, size_t s) {
  return s <= 8192 ? o->iters_small : o->iters_large;
}

static inline int bench_warmup(const BenchOpts* o, size_t s) {
  if (o->warmup >= 0) return o->warmup;
  int w = bench_iters(o, s) / 10;
  return w > 0 ? w : 1;
}

// Next size of the loop: 0 -> 1 -> 2 -> 4 ...
static inline size_t bench_next(size_t s) { return s ? s * 2 : 1; }

// Page-aligned buffer, touched so that first-use faults stay out of timings.
static inline void* bench_alloc(size_t n) {
  void* p = NULL;
  if (posix_memalign(&p, 4096, n ? n : 1) != 0) {
    fprintf(stderr, "out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  memset(p, 'a', n);
  return p;
}

static inline void bench_header(const char* title, const char* columns) {
  if (bench_rank != 0) return;
  printf("# SoftRDMA mpi-tests %s (OSU micro-benchmarks style)\n", title);
  printf("%s\n", columns);
  fflush(stdout);
}

static inline void bench_line(size_t size, double value) {
  if (bench_rank != 0) return;
  printf("%-10zu%18.2f\n", size, value);
  fflush(stdout);
}

static inline void bench_need(int ranks, int even) {
  if ((ranks && bench_size != ranks) || (even && bench_size % 2)) {
    if (bench_rank == 0)
      fprintf(stderr, "this benchmark needs %s%d ranks\n", even ? "an even number of, at least " : "",
              ranks ? ranks : 2);
    MPI_Finalize();
    exit(1);
  }
}
