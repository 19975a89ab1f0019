//! `report --event NAME` in text: the event's profile as the CPU report prints samples, then
//! where the events' data addresses fell (fault events).

use std::io::{self, Write};

use crate::analysis::events::EventProfile;
use crate::output::context::ReportContext;
use crate::output::text::{self, pct};

/// Writes the report of one event.
pub fn report(
    out: &mut dyn Write,
    ctx: &ReportContext,
    p: &EventProfile,
    top: usize,
) -> io::Result<()> {
    writeln!(out, "event: {} (every count below is one event)", p.name)?;
    text::cpu_report(out, ctx, &p.cpu, top)?;
    mappings(out, p, top)
}

/// The mappings the addresses fell in.
pub fn mappings(out: &mut dyn Write, p: &EventProfile, top: usize) -> io::Result<()> {
    if p.mappings.is_empty() {
        return Ok(());
    }
    let total: u64 = p.mappings.iter().map(|m| m.count).sum();
    writeln!(
        out,
        "\nWhere the {} addresses fell ({total} with an address)",
        p.name
    )?;
    writeln!(
        out,
        "{:>7} {:>9}  {:<9} {:>8} {:<37} mapping",
        "share", "events", "kind", "pid", "range"
    )?;
    for m in p.mappings.iter().take(top) {
        let range = if m.kind == "unmapped" {
            "(in no recorded mapping)".to_string()
        } else {
            format!(
                "{:#x}-{:#x} ({} KiB)",
                m.start,
                m.end,
                (m.end - m.start) / 1024
            )
        };
        writeln!(
            out,
            "{:>6.1}% {:>9}  {:<9} {:>8} {:<37} {}",
            pct(m.count, total),
            m.count,
            m.kind,
            m.pid,
            range,
            m.name
        )?;
    }
    Ok(())
}
