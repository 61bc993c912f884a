//! Cache hints: the lines the next event will read are asked for while the current one runs
//! (the network's event loop, `network/engine.rs`). At research scale the state a
//! packet-hop reads (its event entry, the head of a deep queue, the header bytes of a packet
//! that waited in one) was last touched thousands of events before and has left the caches; a
//! hint a few events ahead (`network::events::LEAD`) hides most of that wait behind the work of
//! the events before it.

/// Asks the CPU to bring the cache lines of `value` (its first and its last byte: a value may
/// straddle two lines) into its caches. No effect where there is no such instruction.
#[inline(always)]
pub(crate) fn prefetch<T>(value: &T) {
    let start = (value as *const T).cast::<u8>();
    line(start);
    if size_of::<T>() > 1 {
        line(start.wrapping_add(size_of::<T>() - 1));
    }
}

#[inline(always)]
fn line(at: *const u8) {
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    // SAFETY: PREFETCHT0 is a hint: it reads nothing the program sees, writes nothing and
    // never faults, whatever the address (Intel SDM vol. 2B, PREFETCHh; AMD APM vol. 3).
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}
