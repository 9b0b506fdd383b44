// Blocking point-to-point, 0 B to 64 MiB, every ordered pair of ranks, data
// checked on arrival. Sizes straddle ofi_rxm's protocol switches (eager up to
// 16 KiB, segmented up to 128 KiB, rendezvous by RDMA Read beyond) and the
// MTL's inject limit. MPI_Sendrecv in a ring also runs both directions at once.
#include <string.h>

#include "common.h"

static const size_t kMax = 64u << 20;

// 0, then powers of two (their neighbours are covered in main).
static size_t next_size(size_t s) { return s == 0 ? 1 : s * 2; }

// rank a sends to rank b, b checks and echoes back a transformed copy
static void pair(int me, int a, int b, size_t s, uint8_t* buf, int iter) {
  uint64_t seed = s * 131 + (uint64_t)iter;
  if (me == a) {
    fill(buf, s, a, seed);
    CHECK_MPI(MPI_Send(buf, (int)s, MPI_BYTE, b, iter, MPI_COMM_WORLD));
    memset(buf, 0, s);
    MPI_Status st;
    CHECK_MPI(MPI_Recv(buf, (int)s, MPI_BYTE, b, iter, MPI_COMM_WORLD, &st));
    int count;
    MPI_Get_count(&st, MPI_BYTE, &count);
    CHECK((size_t)count == s, "echo of %zu B came back as %d B", s, count);
    long bad = verify(buf, s, b, seed);
    CHECK(bad < 0, "echo of %zu B from %d differs at byte %ld", s, b, bad);
  } else if (me == b) {
    memset(buf, 0xA5, s);
    MPI_Status st;
    CHECK_MPI(MPI_Recv(buf, (int)s, MPI_BYTE, a, iter, MPI_COMM_WORLD, &st));
    int count;
    MPI_Get_count(&st, MPI_BYTE, &count);
    CHECK((size_t)count == s, "%zu B from %d arrived as %d B", s, a, count);
    CHECK(st.MPI_SOURCE == a && st.MPI_TAG == iter, "status says source %d tag %d",
          st.MPI_SOURCE, st.MPI_TAG);
    long bad = verify(buf, s, a, seed);
    CHECK(bad < 0, "%zu B from %d differ at byte %ld", s, a, bad);
    fill(buf, s, b, seed);
    CHECK_MPI(MPI_Send(buf, (int)s, MPI_BYTE, a, iter, MPI_COMM_WORLD));
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int me, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  uint8_t* buf = xmalloc(kMax);
  uint8_t* rbuf = xmalloc(kMax);

  for (size_t s = 0; s <= kMax; s = next_size(s)) {
    // Large sizes once per pair, small ones a few times (sequence numbers).
    int iters = s <= 65536 ? 3 : 1;
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b) {
        if (a == b) continue;
        if (s > (4u << 20) && a != 0) continue;  // 64 MiB from every rank is slow on 2 cores
        for (int it = 0; it < iters; ++it) pair(me, a, b, s, buf, it);
      }
    // Odd sizes too: one byte beyond and short of each power of two.
    if (s >= 16 && s < kMax) {
      for (int d = -1; d <= 1; d += 2) pair(me, 0, n - 1, s + d, buf, 7);
    }
    // Ring exchange: everybody sends and receives at the same time.
    int right = (me + 1) % n, left = (me + n - 1) % n;
    fill(buf, s, me, s ^ 0x5555);
    memset(rbuf, 0, s);
    MPI_Status st;
    CHECK_MPI(MPI_Sendrecv(buf, (int)s, MPI_BYTE, right, 99, rbuf, (int)s, MPI_BYTE, left, 99,
                           MPI_COMM_WORLD, &st));
    long bad = verify(rbuf, s, left, s ^ 0x5555);
    CHECK(bad < 0, "ring: %zu B from %d differ at byte %ld", s, left, bad);
    if (me == 0) {
      printf("  %zu B ok\n", s);
      fflush(stdout);
    }
  }
  free(buf);
  free(rbuf);
  pass("p2p");
  MPI_Finalize();
  return 0;
}
