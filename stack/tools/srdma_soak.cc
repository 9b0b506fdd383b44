// srdma_soak: a long run of the SoftRDMA engine under mixed load, every byte
// checked, memory watched (issue 6's soak; docs/soak.md).
//
//   server:  srdma_soak --server [-p port]
//   client:  srdma_soak [-p port] [--duration S] [--conns N] [--churn C] ... <server-ip>
//
// Main phase: the client opens --conns connections and for --duration
// seconds keeps --depth operations in flight on each: a seeded random mix of
// Send, RDMA Write, RDMA Read, Write with Immediate, Fetch-Add and
// Compare-Swap, sizes log-uniform from 0 B to --max-size, at odd offsets.
// Operation k of connection c is a pure function of (seed, c, k) (OpGen), so
// the server derives the same sequence and checks what arrives, in order:
//
//   Send            receive buffer      server: length and every byte
//   Write           server write slot   server, once the client's notify word
//                                       (ops issued, written after the Write)
//                                       covers it: placement is in order
//   Write with Imm  server write slot   server, at the receive completion:
//                                       immediate value and every byte
//   Read            server read source  client: every byte (sink poisoned first)
//   Fetch-Add/CSwap server atomic word  client: each returned value against its
//                                       model; server: the final word
//
// Payloads are patterns seeded by (seed, connection, k). iWARP has no
// receiver-not-ready retry, so the server returns credits (receives posted,
// write slots checked) in the client's control block with small Writes; the
// same Write carries the server's verified counts and RSS. At the end the
// client writes the op count into the server's end word; the server finishes
// checking, replays the atomics, writes its final counts, then a done word.
//
// Churn phase (--churn C): C short connections, --churn-parallel open at a
// time, each runs --churn-ops checked operations the same way and closes;
// afterwards the client's descriptors, RSS and lwIP's held frames must be
// back where they were.
//
// Finally the client connects once more with a "bye" request: the server
// rejects it with its own summary (errors, peak and final RSS) and exits.
//
// With --serve-until-idle S the server outlives its clients (the fault
// suite, stack/tests/peer_fault_test.sh): a lost connection is an error event
// it reports and survives, a connection silent for --stall is dropped, and it
// exits after S seconds with nothing open, checking that its engine objects,
// frames, mbufs and memory are back to the idle baseline. Clients run with
// --no-bye so that the server stays up.
//
// Exit: 0 all verified and memory flat; 1 a data mismatch, or memory grew
// (RSS growth after the first 20 % of the main phase above --flat-mib, or
//
// Files: soak_options (command line), soak_protocol (op sequence, wire,
// layout), soak_node (the shared engine), soak_resources (memory, fds),
// soak_client_conn and soak_client, soak_server_conn and soak_server.
#include "stack/tools/soak_options.h"
#include "stack/tools/soak_roles.h"
#include "stack/tools/tool_die.h"

int main(int argc, char** argv) {
  using namespace softrdma;
  tools::set_tool_name("srdma_soak client");
  const soak::Options o = soak::parse_args(argc, argv);
  if (o.server) {
    tools::set_tool_name("srdma_soak server");
    return soak::run_server(o);
  }
  return soak::run_client(o);
}
