//! A cache prefetch hint, for lookups that know their next addresses before they need
//! them (term numbering, answer decoding).

/// Hints the CPU to bring the cache line at `p` into cache; never faults, any address.
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch does not access memory architecturally (no fault, no effect on
    // program state), so any address, even a dangling one, is fine; SSE is baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
