// osu_put_latency, osu_get_latency, osu_put_bw, osu_get_bw: rank 0 accesses
// rank 1's window under a passive-target lock (MPI_Win_lock/flush, OSU's
// default synchronisation for these). First argument: put | get; -b for
// bandwidth (a window of operations per flush) instead of latency (one).
#include "bench.h"

int main(int argc, char** argv) {
  const int get = argc > 1 && strcmp(argv[1], "get") == 0;
  if (argc < 2 || (!get && strcmp(argv[1], "put") != 0)) {
    fprintf(stderr, "usage: %s put|get [-b] [options]\n", argv[0]);
    return 1;
  }
  --argc;
  ++argv;
  int bw = 0;
  if (argc > 1 && strcmp(argv[1], "-b") == 0) {
    bw = 1;
    --argc;
    ++argv;
  }
  BenchOpts o = {1, 4u << 20, bw ? 200 : 1000, bw ? 20 : 100, -1, bw ? 64 : 1};
  bench_init(&argc, &argv, &o);
  bench_need(2, 0);
  const int window = bw ? o.window : 1;
  char* local = bench_alloc(o.max * window);
  char* base;
  MPI_Alloc_mem((MPI_Aint)(o.max * window), MPI_INFO_NULL, &base);
  memset(base, 'b', o.max * window);
  MPI_Win win;
  MPI_Win_create(base, (MPI_Aint)(o.max * window), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  char title[64];
  snprintf(title, sizeof title, "One Sided %s %s Test", get ? "Get" : "Put", bw ? "Bandwidth" : "Latency");
  bench_header(title, bw ? "# Size      Bandwidth (MB/s)" : "# Size          Latency (us)");
  for (size_t s = o.min; s <= o.max; s = bench_next(s)) {
    int iters = bench_iters(&o, s), warm = bench_warmup(&o, s);
    double t = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (bench_rank == 0) {
      MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
      double t0 = 0;
      for (int i = 0; i < warm + iters; ++i) {
        if (i == warm) t0 = MPI_Wtime();
        for (int w = 0; w < window; ++w) {
          if (get) MPI_Get(local + w * s, (int)s, MPI_CHAR, 1, (MPI_Aint)(w * s), (int)s, MPI_CHAR, win);
          else MPI_Put(local + w * s, (int)s, MPI_CHAR, 1, (MPI_Aint)(w * s), (int)s, MPI_CHAR, win);
        }
        MPI_Win_flush(1, win);
      }
      t = MPI_Wtime() - t0;
      MPI_Win_unlock(1, win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    bench_line(s, bw ? (double)s * window * iters / 1e6 / t : t * 1e6 / iters);
  }
  MPI_Win_free(&win);
  MPI_Free_mem(base);
  MPI_Finalize();
  return 0;
}
