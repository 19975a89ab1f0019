//! The text `perf script` prints by default for a recording with call chains, so the tools that
//! read it (FlameGraph's `stackcollapse-perf.pl`, inferno, speedscope, the Firefox Profiler's
//! importer) read crossprof recordings too:
//!
//! ```text
//! app  4242 12345.678901:    1000000 cpu-clock:
//! <TAB>    55d0c0de1139 hot_a (/usr/bin/app)
//! <TAB>    55d0c0de11a2 main (/usr/bin/app)
//!
//! ```
//!
//! (`<TAB>` is a tab.) One block per sample, in time order: the thread's name, its id, the
//! board time in seconds, the period and the event, then one line per frame, innermost first,
//! with the recorded address, the function and the module. perf prints `symbol+0xoffset`; hostside keeps no
//! symbol start addresses, so the offset is left out (every reader above drops it anyway).
//! An inlined call repeats its address on one line per function, as `perf script --inline`
//! does. Frames no symbol covers print as perf's `[unknown]`.

use std::io::Write;

use anyhow::Result;

use crate::output::context::ReportContext;
use crate::output::export::Sampled;

/// Writes every sample (or off-CPU wait, as an `off-cpu` event whose period is the time
/// waited in nanoseconds) of the recording.
pub fn write(ctx: &ReportContext, sampled: Sampled<'_>, out: &mut dyn Write) -> Result<()> {
    let cpu = sampled.profile;
    let event = match ctx.header.event.as_str() {
        _ if sampled.off_cpu => "off-cpu",
        "" => "cpu-clock",
        e => e,
    };
    for s in &cpu.timeline {
        let st = &cpu.stacks[s.stack as usize];
        let comm = ctx.names.at(st.tid, s.time);
        writeln!(
            out,
            "{comm} {:>5} {:>5}.{:06}: {:>10} {event}: ",
            st.tid,
            s.time / 1_000_000_000,
            s.time % 1_000_000_000 / 1000,
            s.period,
        )?;
        let mut at = 0usize;
        for a in &st.addresses {
            for &id in st.frames.iter().skip(at).take(a.frames as usize) {
                let f = cpu.table.get(id);
                let name = if f.symbolized {
                    f.function.as_str()
                } else {
                    "[unknown]"
                };
                writeln!(out, "\t{:>16x} {name} ({})", a.addr, f.module)?;
            }
            at += a.frames as usize;
        }
        writeln!(out)?;
    }
    Ok(())
}
