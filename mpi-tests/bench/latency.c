// osu_latency's measure: ping-pong between ranks 0 and 1, half the round
// trip, in microseconds.
#include "bench.h"

int main(int argc, char** argv) {
  BenchOpts o = {0, 4u << 20, 1000, 100, -1, 1};
  bench_init(&argc, &argv, &o);
  bench_need(2, 0);
  char* sb = bench_alloc(o.max);
  char* rb = bench_alloc(o.max);
  bench_header("Latency Test", "# Size          Latency (us)");
  for (size_t s = o.min; s <= o.max; s = bench_next(s)) {
    int iters = bench_iters(&o, s), warm = bench_warmup(&o, s);
    double t0 = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < warm + iters; ++i) {
      if (i == warm) t0 = MPI_Wtime();
      if (bench_rank == 0) {
        MPI_Send(sb, (int)s, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
        MPI_Recv(rb, (int)s, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(rb, (int)s, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(sb, (int)s, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
      }
    }
    bench_line(s, (MPI_Wtime() - t0) * 1e6 / (2.0 * iters));
  }
  MPI_Finalize();
  return 0;
}
