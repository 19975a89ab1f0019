//! perf's call chains: the kernel's part and the user part of a `PERF_SAMPLE_CALLCHAIN`,
//! told apart by the context markers between them. `rec` splits the chains it reads from the
//! kernel, `hostside` those of a `perf.data` file, and writes them back for perf.

/// Marks the kernel's part of a chain (`PERF_CONTEXT_KERNEL`).
pub const CONTEXT_KERNEL: u64 = (-128i64) as u64;
/// Marks the user part of a chain (`PERF_CONTEXT_USER`).
pub const CONTEXT_USER: u64 = (-512i64) as u64;
/// Any value from here up is a context marker, not an address (`PERF_CONTEXT_MAX`).
pub const CONTEXT_MAX: u64 = (-4095i64) as u64;

/// Appends the addresses of the chain `ips` (innermost first) to `kernel` and `user` by the
/// markers before them; addresses after another marker (hypervisor, guest) count as the
/// kernel's, as addresses before any marker do.
pub fn split(ips: impl IntoIterator<Item = u64>, kernel: &mut Vec<u64>, user: &mut Vec<u64>) {
    let mut in_user = false;
    for a in ips {
        match a {
            CONTEXT_USER => in_user = true,
            CONTEXT_KERNEL => in_user = false,
            a if a >= CONTEXT_MAX => in_user = false,
            a if in_user => user.push(a),
            a => kernel.push(a),
        }
    }
}
