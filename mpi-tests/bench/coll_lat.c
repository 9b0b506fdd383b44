// osu_allreduce and osu_alltoall: average latency of one collective over
// all ranks, in microseconds. First argument: allreduce | alltoall. Sizes
// are bytes per rank (allreduce: of MPI_FLOAT data, as OSU does).
#include "bench.h"

int main(int argc, char** argv) {
  const int a2a = argc > 1 && strcmp(argv[1], "alltoall") == 0;
  if (argc < 2 || (!a2a && strcmp(argv[1], "allreduce") != 0)) {
    fprintf(stderr, "usage: %s allreduce|alltoall [options]\n", argv[0]);
    return 1;
  }
  --argc;
  ++argv;
  BenchOpts o = {a2a ? 1 : 4, 1u << 20, 500, 50, -1, 1};
  bench_init(&argc, &argv, &o);
  size_t per = o.max * (a2a ? bench_size : 1);
  char* sb = bench_alloc(per);
  char* rb = bench_alloc(per);
  bench_header(a2a ? "All-to-All Personalized Exchange Latency Test" : "Allreduce Latency Test",
               "# Size       Avg Latency(us)");
  for (size_t s = o.min; s <= o.max; s = bench_next(s)) {
    if (!a2a && s < sizeof(float)) continue;
    int iters = bench_iters(&o, s), warm = bench_warmup(&o, s);
    double t0 = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < warm + iters; ++i) {
      if (i == warm) t0 = MPI_Wtime();
      if (a2a) MPI_Alltoall(sb, (int)s, MPI_CHAR, rb, (int)s, MPI_CHAR, MPI_COMM_WORLD);
      else MPI_Allreduce(sb, rb, (int)(s / sizeof(float)), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    double lat = (MPI_Wtime() - t0) * 1e6 / iters, sum = 0;
    MPI_Reduce(&lat, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    bench_line(s, sum / bench_size);
  }
  MPI_Finalize();
  return 0;
}
