# Writes a copy of lwIP's tcp_in.c whose demultiplexing asks the pcb index
# (lwip_pcb_index.cc) before scanning tcp_active_pcbs, and tells it what the
# scan found; and whose in-order data is acknowledged by our policy
# (lwip_acks.cc) instead of lwIP's every second segment, with slow start
# growing by what each ACK covers, and whose RTO comes from a hook (lwIP's
# estimate with a floor on lossless links). Stops the build if the source is
# not the text this expects.
function(softrdma_patch_tcp_in src out)
  file(READ "${src}" text)
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
  foreach(anchor scan_at hit_at ack_at abc_at rto_at)
    string(FIND "${text}" "${${anchor}}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "${src}: not lwIP 2.1.3's tcp_input (no ${anchor} text to patch)")
    endif()
  endforeach()
  string(REPLACE "${scan_at}" "${scan_new}" text "${text}")
  string(REPLACE "${hit_at}" "${hit_new}" text "${text}")
  string(REPLACE "${ack_at}" "${ack_new}" text "${text}")
  string(REPLACE "${abc_at}" "${abc_new}" text "${text}")
  string(REPLACE "${rto_at}" "${rto_new}" text "${text}")
  file(WRITE "${out}.new" "${text}")
  configure_file("${out}.new" "${out}" COPYONLY)  # touched only when it changes
endfunction()
