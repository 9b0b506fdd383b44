// Workarounds for DPDK 22.11's memif driver (memif_quirks.cc says what each
// one is for). Private to this folder.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace softrdma::net::dpdk_port {

// The value of key in "name,key=value,..." (empty if absent).
std::string devarg(const std::string& devargs, const std::string& key);
// Adds or checks the bsize= that gives every frame of mtu one descriptor.
bool memif_buffer_size(std::string* devargs, uint32_t mtu, std::string* why);
// Populates the page tables of memif regions not seen before.
void populate_memif_regions();
// Runs fn on EAL's interrupt thread and waits.
void on_interrupt_thread(const std::function<void()>& fn);
// Releases the socket name of a server's listener memif left open.
void retire_memif_listener(const std::string& sock, bool abstract);

}  // namespace softrdma::net::dpdk_port
