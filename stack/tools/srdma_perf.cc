// srdma_perf: latency and bandwidth of the SoftRDMA engine, in the manner of
// perftest's ib_send_lat / ib_write_bw / ib_read_lat.
//
//   server:  srdma_perf [-p port] [--crc 0|1] [--markers]
//   client:  srdma_perf [-p port] [-o op] [-t lat|bw] [-s sizes | -a] [-c] ... <server-ip>
//
// The client chooses the test. Its parameters and buffers reach the server in
// the MPA Request's private data; the server answers with its buffers in the
// Reply's. During the run each side writes small control messages into the
// other's mailbox with RDMA Writes, so control never consumes a posted
// receive. For every message size:
//
//   client                          server
//   BEGIN(size, iterations) ----->  posts receives, fills sources, resets flags
//                <--------------    READY
//   ... the measured operations: ping-pong, or a window of -d in flight ...
//   END -------------------------->  (all data has landed: one stream, in order)
//                <--------------    DONE(mismatches the server found)
//
// Bandwidth flow control: iWARP has no receiver-not-ready retry, so a Send
// that finds no posted receive kills the connection. The server writes its
// running count of posted receives into the client's credit word and the
// client holds message m back until m < credit. Verified Write runs use the
// same word for ring slots the server has checked; the client says how far it
// has written with small Writes into the server's notify word.
//
// A server holds every Hello to the limits in perf_protocol.h before it
// allocates anything; one outside them is rejected, with the reason on both
// sides, and the server waits on for the next client.
//
// Files: perf_options (command line), perf_protocol (Hello, Welcome, control
// messages, limits), perf_endpoint (the QP and its mailbox), perf_client,
// perf_server; the table and the checks are shared with tcp_baseline.
#include "stack/tools/perf_options.h"
#include "stack/tools/perf_roles.h"
#include "stack/tools/tool_common.h"
#include "stack/tools/tool_die.h"

int main(int argc, char** argv) {
  using namespace softrdma;
  tools::set_tool_name("srdma_perf");
  const perf::Options o = perf::parse_args(argc, argv);
  const tools::Clock::time_point deadline = tools::deadline_after(o.timeout_s);
  if (o.host.empty()) return perf::run_server(o, deadline);
  return perf::run_client(o, deadline);
}
