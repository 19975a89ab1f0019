//! Aggregations over a recording: what the reports and exports are computed from.

pub mod cpu;
pub mod diff;
pub mod heap;
pub mod heap_diff;
pub mod heap_finish;
pub mod heap_live;
pub mod heap_rules;
pub mod heap_stream;
pub mod heap_timeline;
pub mod load;
pub mod trace_tree;
