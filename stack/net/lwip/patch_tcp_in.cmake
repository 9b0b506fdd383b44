# Writes a copy of lwIP's tcp_in.c whose demultiplexing asks the pcb index
# (lwip_pcb_index.cc) before scanning tcp_active_pcbs, and tells it what the
# scan found; and whose in-order data is acknowledged by our policy
# (lwip_acks.cc) instead of lwIP's every second segment, with slow start
# growing by what each ACK covers, and whose RTO comes from a hook (lwIP's
# estimate with a floor on lossless links).
include(${CMAKE_CURRENT_LIST_DIR}/patch_lwip.cmake)

function(softrdma_patch_tcp_in src out)
  set(scan_at "  prev = NULL;\n\n  for (pcb = tcp_active_pcbs; pcb != NULL; pcb = pcb->next) {")
  set(scan_new "  prev = NULL;\n\n  pcb = LWIP_HOOK_TCP_FIND_ACTIVE(tcphdr->src, tcphdr->dest, ip_current_src_addr(),\n                                 ip_current_dest_addr(), netif_get_index(ip_data.current_input_netif));\n  if (pcb == NULL)\n  for (pcb = tcp_active_pcbs; pcb != NULL; pcb = pcb->next) {")
  set(hit_at "      LWIP_ASSERT(\"tcp_input: pcb->next != pcb (after cache)\", pcb->next != pcb);\n      break;")
  set(hit_new "      LWIP_ASSERT(\"tcp_input: pcb->next != pcb (after cache)\", pcb->next != pcb);\n      LWIP_HOOK_TCP_FOUND_ACTIVE(pcb);\n      break;")
  set(ack_at "        /* Acknowledge the segment(s). */\n        tcp_ack(pcb);")
  set(ack_new "        /* Acknowledge the segment(s). */\n        LWIP_HOOK_TCP_DATA_ACK(pcb, tcplen);")
  # Slow start grows by what an ACK covers (as Linux does), not by at most
  # two segments (RFC 3465's L = 2): with one ACK per received burst, L = 2
  # held a new connection's window small for many round trips.
  set(abc_at "          increase = LWIP_MIN(acked, (tcpwnd_size_t)(num_seg * pcb->mss));")
  set(abc_new "          increase = num_seg == 1 ? LWIP_MIN(acked, pcb->mss) : acked;")
  # Where an ACK of new data resets the RTO, and where an RTT sample sets it.
  set(rto_at "pcb->rto = (s16_t)((pcb->sa >> 3) + pcb->sv);")
  set(rto_new "pcb->rto = LWIP_HOOK_TCP_RTO(pcb);")
  softrdma_patch_lwip("${src}" "${out}" scan hit ack abc rto)
endfunction()
