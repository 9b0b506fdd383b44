# Writes a copy of lwIP's tcp_out.c that adds bytes (tcp_write) or a FIN
# (tcp_send_fin) to the last unsent segment only when that segment ends the
# stream. Fast retransmit (tcp_rexmit) can leave a lost segment as the last
# unsent one while later segments wait in unacked; if the link refuses its
# frame, lwIP 2.1.3 then appends the next write to it, and the retransmission
# carries those bytes under sequence numbers the later segments already took:
# a corrupt stream (MPA sees a bad CRC or a bad header).
include(${CMAKE_CURRENT_LIST_DIR}/patch_lwip.cmake)

function(softrdma_patch_tcp_out src out)
  set(tail "lwip_ntohl(last_unsent->tcphdr->seqno) + TCP_TCPLEN(last_unsent) == pcb->snd_lbb")
  set(concat_at "    if ((pos < len) && (space > 0) && (last_unsent->len > 0)) {")
  set(concat_new "    if ((pos < len) && (space > 0) && (last_unsent->len > 0) &&\n        (${tail})) {")
  set(fin_at "    if ((TCPH_FLAGS(last_unsent->tcphdr) & (TCP_SYN | TCP_FIN | TCP_RST)) == 0) {")
  set(fin_new "    if ((TCPH_FLAGS(last_unsent->tcphdr) & (TCP_SYN | TCP_FIN | TCP_RST)) == 0 &&\n        (${tail})) {")
  softrdma_patch_lwip("${src}" "${out}" concat fin)
endfunction()
