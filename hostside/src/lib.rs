//! hostside: the developer-machine half of crossprof. It reads a recording made on any board,
//! finds each mapped module in a debug sysroot by build-id, symbolizes, and reports.
//!
//! The data path is a straight line: [`recording`] (the file) → [`processes`] (who mapped what,
//! when) → [`resolve`] (sysroot lookup and symbolization) → [`analysis`] (aggregations) →
//! [`output`] (text, JSON, flame graphs, exports). The binary in `main.rs` only parses
//! arguments and dispatches to [`commands`].
#![deny(missing_docs)]

pub mod analysis;
pub mod cli;
pub mod commands;
pub mod diagnostics;
pub mod filter;
pub mod frames;
pub mod jit;
pub mod output;
pub mod pipeline;
pub mod processes;
pub mod recording;
pub mod remote;
pub mod resolve;
pub mod segments;
pub mod stack_join;
pub mod unwinding;
