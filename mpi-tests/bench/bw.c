// osu_bw and osu_bibw: rank 0 sends a window of messages to rank 1, which
// answers with one short message; with -b both ranks send windows to each
// other at once. MB/s = 10^6 bytes per second, as OSU counts.
#include "bench.h"

int main(int argc, char** argv) {
  BenchOpts o = {1, 4u << 20, 200, 20, -1, 64};
  int bidir = 0;
  for (int i = 1; i < argc; ++i)
    if (strcmp(argv[i], "-b") == 0) {  // ours: taken out before getopt sees it
      bidir = 1;
      for (int j = i; j < argc - 1; ++j) argv[j] = argv[j + 1];
      --argc;
      break;
    }
  bench_init(&argc, &argv, &o);
  bench_need(2, 0);
  char* sb = bench_alloc(o.max * o.window);
  char* rb = bench_alloc(o.max * o.window);
  MPI_Request* req = malloc(2 * o.window * sizeof(MPI_Request));
  char ack = 0;
  bench_header(bidir ? "Bi-Directional Bandwidth Test" : "Bandwidth Test",
               "# Size      Bandwidth (MB/s)");
  const int peer = 1 - bench_rank;
  for (size_t s = o.min; s <= o.max; s = bench_next(s)) {
    int iters = bench_iters(&o, s), warm = bench_warmup(&o, s);
    double t0 = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < warm + iters; ++i) {
      if (i == warm) t0 = MPI_Wtime();
      int k = 0;
      // Receives first: a posted receive takes rendezvous data straight in.
      if (bench_rank == 1 || bidir)
        for (int w = 0; w < o.window; ++w)
          MPI_Irecv(rb + w * s, (int)s, MPI_CHAR, peer, 100, MPI_COMM_WORLD, &req[k++]);
      if (bench_rank == 0 || bidir)
        for (int w = 0; w < o.window; ++w)
          MPI_Isend(sb + w * s, (int)s, MPI_CHAR, peer, 100, MPI_COMM_WORLD, &req[k++]);
      MPI_Waitall(k, req, MPI_STATUSES_IGNORE);
      if (bench_rank == 1) MPI_Send(&ack, 1, MPI_CHAR, 0, 101, MPI_COMM_WORLD);
      else MPI_Recv(&ack, 1, MPI_CHAR, 1, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    double t = MPI_Wtime() - t0;
    double bytes = (double)s * o.window * iters * (bidir ? 2 : 1);
    bench_line(s, bytes / 1e6 / t);
  }
  MPI_Finalize();
  return 0;
}
