//! Aggregations over a recording: what the reports and exports are computed from.

pub mod cpu;
pub mod diff;
pub mod heap;
