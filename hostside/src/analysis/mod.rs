//! Aggregations over a recording: what the reports and exports are computed from.

pub mod cpu;
pub mod load;
pub mod diff;
