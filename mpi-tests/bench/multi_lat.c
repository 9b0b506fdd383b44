// osu_multi_lat: ranks pair up (i with i + n/2) and ping-pong at the same
// time; the latency printed is the average over pairs, half round trip, us.
#include "bench.h"

int main(int argc, char** argv) {
  BenchOpts o = {0, 1u << 20, 500, 50, -1, 1};
  bench_init(&argc, &argv, &o);
  bench_need(0, 1);
  char* sb = bench_alloc(o.max);
  char* rb = bench_alloc(o.max);
  const int half = bench_size / 2;
  const int sender = bench_rank < half;
  const int peer = sender ? bench_rank + half : bench_rank - half;
  bench_header("Multi Latency Test", "# Size          Latency (us)");
  for (size_t s = o.min; s <= o.max; s = bench_next(s)) {
    int iters = bench_iters(&o, s), warm = bench_warmup(&o, s);
    double t0 = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < warm + iters; ++i) {
      if (i == warm) t0 = MPI_Wtime();
      if (sender) {
        MPI_Send(sb, (int)s, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
        MPI_Recv(rb, (int)s, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(rb, (int)s, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(sb, (int)s, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
      }
    }
    double lat = (MPI_Wtime() - t0) * 1e6 / (2.0 * iters), sum = 0;
    MPI_Reduce(&lat, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    bench_line(s, sum / bench_size);
  }
  MPI_Finalize();
  return 0;
}
