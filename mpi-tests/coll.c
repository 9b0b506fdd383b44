// Collectives with checked results: barrier, bcast, reduce, allreduce,
// alltoall, allgather, at sizes on both sides of the eager/rendezvous
// switch. Every rank contributes values derived from its rank, so each
// result has one right answer that every rank can compute for itself.
#include <string.h>

#include "common.h"

static int me, n;

// Barrier: nobody leaves before everybody arrived. Each rank Isends a token
// to rank 0 after the barrier; rank 0 checks, before its own barrier ends,
// that none arrived (it cannot have: nobody got past), then that all do.
static void barrier(void) {
  for (int round = 0; round < 10; ++round) {
    int token = round, flag = 0;
    MPI_Request req = MPI_REQUEST_NULL;
    if (me == 0) {
      MPI_Status st;
      CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, 300 + round, MPI_COMM_WORLD, &flag, &st));
      CHECK(!flag, "a token of round %d arrived before the barrier", round);
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (me != 0) CHECK_MPI(MPI_Isend(&token, 1, MPI_INT, 0, 300 + round, MPI_COMM_WORLD, &req));
    if (me == 0)
      for (int p = 1; p < n; ++p) {
        int got = -1;
        CHECK_MPI(MPI_Recv(&got, 1, MPI_INT, p, 300 + round, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(got == round, "barrier token %d from %d in round %d", got, p, round);
      }
    CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
  }
}

static void bcast(size_t s) {
  uint8_t* b = xmalloc(s);
  for (int root = 0; root < n; ++root) {
    if (me == root) fill(b, s, root, s);
    else memset(b, 0, s);
    CHECK_MPI(MPI_Bcast(b, (int)s, MPI_BYTE, root, MPI_COMM_WORLD));
    long bad = verify(b, s, root, s);
    CHECK(bad < 0, "bcast %zu B from %d differs at %ld", s, root, bad);
  }
  free(b);
}

// Element i of rank r's contribution, and the sums, maxima and products
// the reductions must produce.
static int64_t val(int r, size_t i) { return (int64_t)(i % 1000) * (r + 1) - r; }

static void reduce(size_t count) {
  int64_t* in = xmalloc(count * sizeof(int64_t));
  int64_t* out = xmalloc(count * sizeof(int64_t));
  double* din = xmalloc(count * sizeof(double));
  double* dout = xmalloc(count * sizeof(double));
  for (size_t i = 0; i < count; ++i) {
    in[i] = val(me, i);
    din[i] = (double)val(me, i) * 0.5;  // exact in binary: sums are exact too
  }
  for (int root = 0; root < n; root += (n > 2 ? n - 1 : 1)) {
    memset(out, 0, count * sizeof(int64_t));
    CHECK_MPI(MPI_Reduce(in, out, (int)count, MPI_INT64_T, MPI_SUM, root, MPI_COMM_WORLD));
    if (me == root)
      for (size_t i = 0; i < count; ++i) {
        int64_t want = 0;
        for (int r = 0; r < n; ++r) want += val(r, i);
        CHECK(out[i] == want, "reduce sum[%zu] = %lld, want %lld", i, (long long)out[i],
              (long long)want);
      }
  }
  CHECK_MPI(MPI_Allreduce(in, out, (int)count, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD));
  for (size_t i = 0; i < count; ++i) {
    int64_t want = val(0, i);
    for (int r = 1; r < n; ++r) want = val(r, i) > want ? val(r, i) : want;
    CHECK(out[i] == want, "allreduce max[%zu] = %lld, want %lld", i, (long long)out[i],
          (long long)want);
  }
  CHECK_MPI(MPI_Allreduce(din, dout, (int)count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  for (size_t i = 0; i < count; ++i) {
    double want = 0;
    for (int r = 0; r < n; ++r) want += (double)val(r, i) * 0.5;
    CHECK(dout[i] == want, "allreduce double sum[%zu] = %g, want %g", i, dout[i], want);
  }
  // In place, and a non-commutative-looking op on ranks: MIN of ranks is 0.
  for (size_t i = 0; i < count; ++i) out[i] = me;
  CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, out, (int)count, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD));
  for (size_t i = 0; i < count; ++i) CHECK(out[i] == 0, "in-place min[%zu] = %lld", i, (long long)out[i]);
  free(in);
  free(out);
  free(din);
  free(dout);
}

// Block j of rank r's send buffer goes to rank j: it is pattern(r, j).
static void alltoall(size_t s) {
  uint8_t* sb = xmalloc(s * n);
  uint8_t* rb = xmalloc(s * n);
  for (int j = 0; j < n; ++j) fill(sb + j * s, s, me, 1000 + j);
  memset(rb, 0, s * n);
  CHECK_MPI(MPI_Alltoall(sb, (int)s, MPI_BYTE, rb, (int)s, MPI_BYTE, MPI_COMM_WORLD));
  for (int r = 0; r < n; ++r) {
    long bad = verify(rb + r * s, s, r, 1000 + me);
    CHECK(bad < 0, "alltoall %zu B: block from %d differs at %ld", s, r, bad);
  }
  free(sb);
  free(rb);
}

static void allgather(size_t s) {
  uint8_t* sb = xmalloc(s);
  uint8_t* rb = xmalloc(s * n);
  fill(sb, s, me, 2000 + s);
  memset(rb, 0, s * n);
  CHECK_MPI(MPI_Allgather(sb, (int)s, MPI_BYTE, rb, (int)s, MPI_BYTE, MPI_COMM_WORLD));
  for (int r = 0; r < n; ++r) {
    long bad = verify(rb + r * s, s, r, 2000 + s);
    CHECK(bad < 0, "allgather %zu B: block of %d differs at %ld", s, r, bad);
  }
  free(sb);
  free(rb);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  barrier();
  if (me == 0) printf("  barrier ok\n");
  const size_t sizes[] = {1, 8, 1000, 16384, 65537, 1 << 20, 4 << 20};
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; ++k) {
    size_t s = sizes[k];
    bcast(s);
    reduce(s / 8 ? s / 8 : 1);
    alltoall(s);
    allgather(s);
    if (me == 0) {
      printf("  %zu B ok\n", s);
      fflush(stdout);
    }
  }
  pass("coll");
  MPI_Finalize();
  return 0;
}
