// osu_mbw_mr: ranks pair up (i with i + n/2), the first half streams
// windows of messages to the second; aggregate MB/s and messages per second.
#include "bench.h"

int main(int argc, char** argv) {
  BenchOpts o = {1, 4u << 20, 200, 20, -1, 64};
  bench_init(&argc, &argv, &o);
  bench_need(0, 1);
  char* sb = bench_alloc(o.max * o.window);
  char* rb = bench_alloc(o.max * o.window);
  MPI_Request* req = malloc(o.window * sizeof(MPI_Request));
  const int half = bench_size / 2;
  const int sender = bench_rank < half;
  const int peer = sender ? bench_rank + half : bench_rank - half;
  char ack = 0;
  if (bench_rank == 0) {
    printf("# SoftRDMA mpi-tests Multiple Bandwidth / Message Rate Test (OSU micro-benchmarks style)\n");
    printf("# [ pairs: %d ] [ window size: %d ]\n", half, o.window);
    printf("# Size                  MB/s        Messages/s\n");
  }
  for (size_t s = o.min; s <= o.max; s = bench_next(s)) {
    int iters = bench_iters(&o, s), warm = bench_warmup(&o, s);
    double t0 = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < warm + iters; ++i) {
      if (i == warm) t0 = MPI_Wtime();
      for (int w = 0; w < o.window; ++w) {
        if (sender) MPI_Isend(sb + w * s, (int)s, MPI_CHAR, peer, 100, MPI_COMM_WORLD, &req[w]);
        else MPI_Irecv(rb + w * s, (int)s, MPI_CHAR, peer, 100, MPI_COMM_WORLD, &req[w]);
      }
      MPI_Waitall(o.window, req, MPI_STATUSES_IGNORE);
      if (sender) MPI_Recv(&ack, 1, MPI_CHAR, peer, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      else MPI_Send(&ack, 1, MPI_CHAR, peer, 101, MPI_COMM_WORLD);
    }
    double t = MPI_Wtime() - t0;
    double rate = sender ? (double)o.window * iters / t : 0, total = 0;
    MPI_Reduce(&rate, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (bench_rank == 0) {
      printf("%-10zu%18.2f%18.2f\n", s, total * s / 1e6, total);
      fflush(stdout);
    }
  }
  MPI_Finalize();
  return 0;
}
