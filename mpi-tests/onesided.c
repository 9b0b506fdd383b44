// One-sided communication with checked results: MPI_Put, MPI_Get and
// MPI_Accumulate under fence (active target) and lock/unlock (passive
// target), on a window of kWin bytes per rank, at sizes from 8 B to 4 MiB.
// Open MPI runs one-sided over softrdma only with its pt2pt component
// (`--mca osc pt2pt`: active messages over the PML, hence the ofi MTL);
// Debian's default osc/rdma goes through shared memory on one host. pt2pt
// refuses MPI_THREAD_MULTIPLE in 4.1, so this asks for MPI_THREAD_SINGLE.
#include <string.h>

#include "common.h"

static const size_t kWin = 4u << 20;
static int me, n;

// Active target: everybody puts a block into its right neighbour's window
// and gets one from its left neighbour's, between fences.
static void fence_put_get(MPI_Win win, uint8_t* base, size_t s) {
  int right = (me + 1) % n, left = (me + n - 1) % n;
  uint8_t* src = xmalloc(s);
  uint8_t* dst = xmalloc(s);
  fill(src, s, me, s + 1);
  memset(base, 0, s);
  CHECK_MPI(MPI_Win_fence(0, win));
  CHECK_MPI(MPI_Put(src, (int)s, MPI_BYTE, right, 0, (int)s, MPI_BYTE, win));
  CHECK_MPI(MPI_Win_fence(0, win));
  long bad = verify(base, s, left, s + 1);  // what the left neighbour put here
  CHECK(bad < 0, "fence put %zu B from %d differs at %ld", s, left, bad);
  // The window now holds the left neighbour's data; get the right's window
  // (which holds mine).
  memset(dst, 0, s);
  CHECK_MPI(MPI_Get(dst, (int)s, MPI_BYTE, right, 0, (int)s, MPI_BYTE, win));
  CHECK_MPI(MPI_Win_fence(0, win));
  bad = verify(dst, s, me, s + 1);
  CHECK(bad < 0, "fence get %zu B from %d differs at %ld", s, right, bad);
  free(src);
  free(dst);
}

// Every rank adds its contribution into rank 0's window; rank 0 checks sums.
static void fence_accumulate(MPI_Win win, uint8_t* base, size_t count) {
  int64_t* w = (int64_t*)base;
  int64_t* src = xmalloc(count * sizeof(int64_t));
  for (size_t i = 0; i < count; ++i) src[i] = (int64_t)i * (me + 1) + 7;
  memset(base, 0, count * sizeof(int64_t));
  CHECK_MPI(MPI_Win_fence(0, win));
  CHECK_MPI(MPI_Accumulate(src, (int)count, MPI_INT64_T, 0, 0, (int)count, MPI_INT64_T, MPI_SUM,
                           win));
  CHECK_MPI(MPI_Win_fence(0, win));
  if (me == 0)
    for (size_t i = 0; i < count; ++i) {
      int64_t want = 0;
      for (int r = 0; r < n; ++r) want += (int64_t)i * (r + 1) + 7;
      CHECK(w[i] == want, "accumulate[%zu] = %lld, want %lld", i, (long long)w[i],
            (long long)want);
    }
  free(src);
}

// Passive target: one rank at a time locks rank 0's window exclusively,
// reads the counter, checks it, increments it with a put and unlocks; then
// all ranks accumulate under shared locks. Each rank also writes a block
// into its own slot of every other rank's window and reads it back.
static void passive(MPI_Win win, uint8_t* base, size_t s) {
  int64_t* counter = (int64_t*)base;
  if (me == 0) *counter = 0;
  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  for (int turn = 0; turn < n; ++turn) {
    if (turn == me) {
      int64_t v = -1;
      CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
      CHECK_MPI(MPI_Get(&v, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, win));
      CHECK_MPI(MPI_Win_flush(0, win));
      CHECK(v == turn, "passive counter %lld at turn %d", (long long)v, turn);
      ++v;
      CHECK_MPI(MPI_Put(&v, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, win));
      CHECK_MPI(MPI_Win_unlock(0, win));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  }
  int64_t one = 1;
  CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
  CHECK_MPI(MPI_Accumulate(&one, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, MPI_SUM, win));
  CHECK_MPI(MPI_Win_unlock(0, win));
  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  if (me == 0) {
    // The window is this process's memory: read it under a lock on self.
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
    CHECK(*counter == 2 * n, "passive counter %lld, want %d", (long long)*counter, 2 * n);
    CHECK_MPI(MPI_Win_unlock(0, win));
  }
  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

  // Slots: rank r writes into [8 + r * slot, ...) of every other window.
  size_t slot = (kWin - 8) / n;
  size_t len = s < slot ? s : slot;
  uint8_t* src = xmalloc(len);
  uint8_t* back = xmalloc(len);
  fill(src, len, me, 4242 + len);
  for (int t = 0; t < n; ++t) {
    if (t == me) continue;
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, t, 0, win));
    CHECK_MPI(MPI_Put(src, (int)len, MPI_BYTE, t, 8 + me * slot, (int)len, MPI_BYTE, win));
    CHECK_MPI(MPI_Win_flush(t, win));
    memset(back, 0, len);
    CHECK_MPI(MPI_Get(back, (int)len, MPI_BYTE, t, 8 + me * slot, (int)len, MPI_BYTE, win));
    CHECK_MPI(MPI_Win_unlock(t, win));
    long bad = verify(back, len, me, 4242 + len);
    CHECK(bad < 0, "passive put/get %zu B at %d differs at %ld", len, t, bad);
  }
  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  // And the owners see every other rank's slot.
  CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, me, 0, win));
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    long bad = verify(base + 8 + r * slot, len, r, 4242 + len);
    CHECK(bad < 0, "slot of %d (%zu B) differs at %ld", r, len, bad);
  }
  CHECK_MPI(MPI_Win_unlock(me, win));
  free(src);
  free(back);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  uint8_t* base;
  MPI_Win win;
  CHECK_MPI(MPI_Alloc_mem((MPI_Aint)kWin, MPI_INFO_NULL, &base));
  CHECK_MPI(MPI_Win_create(base, (MPI_Aint)kWin, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
  const size_t sizes[] = {8, 1000, 16384, 65536, 1 << 20, 4 << 20};
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; ++k) {
    size_t s = sizes[k];
    fence_put_get(win, base, s);
    fence_accumulate(win, base, s / 8);
    passive(win, base, s);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0) {
      printf("  %zu B ok\n", s);
      fflush(stdout);
    }
  }
  CHECK_MPI(MPI_Win_free(&win));
  CHECK_MPI(MPI_Free_mem(base));
  pass("onesided");
  MPI_Finalize();
  return 0;
}
