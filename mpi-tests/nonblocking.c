// Non-blocking and wildcard receives, many outstanding requests.
//  1. every rank posts kDepth Irecvs per peer before any Isend, then all
//     Isends at once (rxm's unexpected-message and posted-receive queues,
//     the provider's send queue running full and -FI_EAGAIN);
//  2. MPI_ANY_SOURCE / MPI_ANY_TAG receives, checked by the status;
//  3. messages that arrive before their receive is posted (unexpected), of
//     eager and rendezvous sizes, matched out of order by tag;
//  4. MPI_Test polling and MPI_Waitany.
#include <string.h>

#include "common.h"

enum { kDepth = 64 };

static void many_outstanding(int me, int n, size_t s) {
  int peers = n - 1;
  size_t total = (size_t)peers * kDepth;
  uint8_t* sbuf = xmalloc(total * s);
  uint8_t* rbuf = xmalloc(total * s);
  MPI_Request* req = xmalloc(2 * total * sizeof(MPI_Request));
  memset(rbuf, 0, total * s);
  size_t k = 0;
  for (int p = 0, j = 0; p < n; ++p) {
    if (p == me) continue;
    for (int d = 0; d < kDepth; ++d, ++k)
      CHECK_MPI(MPI_Irecv(rbuf + k * s, (int)s, MPI_BYTE, p, d, MPI_COMM_WORLD, &req[k]));
    ++j;
  }
  MPI_Barrier(MPI_COMM_WORLD);  // all receives are posted everywhere
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    for (int d = 0; d < kDepth; ++d, ++k) {
      uint8_t* b = sbuf + (k - total) * s;
      fill(b, s, me, (uint64_t)p * 1000 + d);
      CHECK_MPI(MPI_Isend(b, (int)s, MPI_BYTE, p, d, MPI_COMM_WORLD, &req[k]));
    }
  }
  CHECK_MPI(MPI_Waitall((int)(2 * total), req, MPI_STATUSES_IGNORE));
  k = 0;
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    for (int d = 0; d < kDepth; ++d, ++k) {
      long bad = verify(rbuf + k * s, s, p, (uint64_t)me * 1000 + d);
      CHECK(bad < 0, "outstanding: %zu B tag %d from %d differ at %ld", s, d, p, bad);
    }
  }
  free(sbuf);
  free(rbuf);
  free(req);
}

// Everyone sends kDepth tagged messages to rank 0, which takes them with
// wildcards and checks each against the status it came with. On a
// communicator of its own: a sender that finished goes on to the next test,
// whose messages MPI_ANY_TAG would otherwise match here.
static void wildcards(int me, int n, size_t s) {
  MPI_Comm comm;
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  uint8_t* buf = xmalloc(s);
  if (me != 0) {
    for (int d = 0; d < kDepth; ++d) {
      fill(buf, s, me, 77 + d);
      CHECK_MPI(MPI_Send(buf, (int)s, MPI_BYTE, 0, d, comm));
    }
  } else {
    int* next = xmalloc(n * sizeof(int));  // per sender, the tag expected next (order kept)
    memset(next, 0, n * sizeof(int));
    for (int m = 0; m < (n - 1) * kDepth; ++m) {
      MPI_Status st;
      CHECK_MPI(MPI_Recv(buf, (int)s, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &st));
      int src = st.MPI_SOURCE, count;
      MPI_Get_count(&st, MPI_BYTE, &count);
      CHECK(src > 0 && src < n, "wildcard: source %d", src);
      CHECK(st.MPI_TAG == next[src], "wildcard: tag %d from %d, expected %d (order)", st.MPI_TAG,
            src, next[src]);
      CHECK((size_t)count == s, "wildcard: %d B, expected %zu", count, s);
      long bad = verify(buf, s, src, 77 + st.MPI_TAG);
      CHECK(bad < 0, "wildcard: %zu B from %d tag %d differ at %ld", s, src, st.MPI_TAG, bad);
      ++next[src];
    }
    free(next);
  }
  free(buf);
  CHECK_MPI(MPI_Comm_free(&comm));
}

// Rank 1 sends tags 0..k-1 before rank 0 posts anything; rank 0 then
// receives them in reverse tag order, so each is matched from the
// unexpected queue (rendezvous sizes too: only the header is unexpected).
static void unexpected(int me, size_t s) {
  enum { k = 8 };
  if (me > 1) return;
  uint8_t* buf = xmalloc(k * s);
  MPI_Request req[k];
  if (me == 1) {
    for (int t = 0; t < k; ++t) {
      fill(buf + t * s, s, 1, 500 + t);
      CHECK_MPI(MPI_Isend(buf + t * s, (int)s, MPI_BYTE, 0, t, MPI_COMM_WORLD, &req[t]));
    }
    CHECK_MPI(MPI_Send(NULL, 0, MPI_BYTE, 0, 1000, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Waitall(k, req, MPI_STATUSES_IGNORE));
  } else {
    // The marker comes after the others on the same pair: they are all here
    // (as far as matching goes) once it is.
    CHECK_MPI(MPI_Recv(NULL, 0, MPI_BYTE, 1, 1000, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    for (int t = k - 1; t >= 0; --t)
      CHECK_MPI(MPI_Irecv(buf + t * s, (int)s, MPI_BYTE, 1, t, MPI_COMM_WORLD, &req[t]));
    int done = 0;
    while (done < k) {  // Waitany: completions in any order, each once
      int idx;
      CHECK_MPI(MPI_Waitany(k, req, &idx, MPI_STATUS_IGNORE));
      CHECK(idx != MPI_UNDEFINED, "waitany: nothing left after %d", done);
      long bad = verify(buf + idx * s, s, 1, 500 + idx);
      CHECK(bad < 0, "unexpected: %zu B tag %d differ at %ld", s, idx, bad);
      ++done;
    }
  }
  free(buf);
}

// Non-blocking ring exchange completed by MPI_Test polling only.
static void test_polling(int me, int n, size_t s) {
  uint8_t* sb = xmalloc(s);
  uint8_t* rb = xmalloc(s);
  int right = (me + 1) % n, left = (me + n - 1) % n;
  fill(sb, s, me, 9);
  MPI_Request req[2];
  CHECK_MPI(MPI_Irecv(rb, (int)s, MPI_BYTE, left, 5, MPI_COMM_WORLD, &req[0]));
  CHECK_MPI(MPI_Isend(sb, (int)s, MPI_BYTE, right, 5, MPI_COMM_WORLD, &req[1]));
  int flag = 0;
  while (!flag) CHECK_MPI(MPI_Testall(2, req, &flag, MPI_STATUSES_IGNORE));
  long bad = verify(rb, s, left, 9);
  CHECK(bad < 0, "test polling: %zu B from %d differ at %ld", s, left, bad);
  free(sb);
  free(rb);
}

// A rank that is busy elsewhere (not in MPI) while every other rank sends
// it kFlood small messages: more than ofi_rxm posts receives for, and
// more than the engine holds for want of a receive (beyond that the
// connection would end in a DDP Terminate); the provider's credits hold
// the senders back instead.
static void flood(int me, int n) {
  enum { kFlood = 2000 };
  if (me == 0) {
    double until = MPI_Wtime() + 1.0;
    while (MPI_Wtime() < until) {
    }
    int* got = xmalloc(kFlood * sizeof(int));
    for (int p = 1; p < n; ++p)
      for (int i = 0; i < kFlood; ++i) {
        CHECK_MPI(MPI_Recv(&got[i], 1, MPI_INT, p, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(got[i] == i * p, "flood: message %d from %d says %d", i, p, got[i]);
      }
    free(got);
  } else {
    int* vals = xmalloc(kFlood * sizeof(int));
    MPI_Request* req = xmalloc(kFlood * sizeof(MPI_Request));
    for (int i = 0; i < kFlood; ++i) {
      vals[i] = i * me;
      CHECK_MPI(MPI_Isend(&vals[i], 1, MPI_INT, 0, i, MPI_COMM_WORLD, &req[i]));
    }
    CHECK_MPI(MPI_Waitall(kFlood, req, MPI_STATUSES_IGNORE));
    free(vals);
    free(req);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int me, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  flood(me, n);
  if (me == 0) printf("  flood ok\n");
  const size_t sizes[] = {0, 8, 1000, 16384, 20000, 131073, 1 << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; ++i) {
    size_t s = sizes[i];
    if (s <= 131073) many_outstanding(me, n, s);
    wildcards(me, n, s);
    unexpected(me, s);
    test_polling(me, n, s);
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
      printf("  %zu B ok\n", s);
      fflush(stdout);
    }
  }
  pass("nonblocking");
  MPI_Finalize();
  return 0;
}
