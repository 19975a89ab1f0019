//! Flame graphs (interactive SVG via inferno) and the folded-stack text they are drawn from.

use std::io::Write;

use anyhow::{Context, Result};

/// Draws an interactive SVG flame graph from folded lines.
pub fn svg(folded: &[String], title: &str, count_name: &str, out: impl Write) -> Result<()> {
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title.to_string();
    opts.count_name = count_name.to_string();
    if folded.is_empty() {
        // inferno refuses empty input; an empty graph with a clear title is more useful.
        let empty = ["(no samples) 1".to_string()];
        return inferno::flamegraph::from_lines(&mut opts, empty.iter().map(|s| s.as_str()), out)
            .context("cannot write flame graph");
    }
    inferno::flamegraph::from_lines(&mut opts, folded.iter().map(|s| s.as_str()), out)
        .context("cannot write flame graph")
}
