//! Which data mappings (memory that holds no code) a recording keeps, and the stack limit that
//! goes with them.
//!
//! Code mappings are always recorded: samples are placed in them. Data mappings matter to two
//! analyses only, and each needs a different few:
//!
//! - fault events (`-e page-faults`...) tell their addresses apart by the mapping they fall
//!   in: the heap, a stack, anonymous memory, a mapped file. Those recordings keep every data
//!   mapping ([`DataMaps::All`]).
//! - stack usage per thread (`hostside report --stack-usage`) measures each stack-copy
//!   sample's stack pointer against the top of the thread's stack mapping. Stack-copy
//!   recordings keep the anonymous writable mappings, where thread stacks live, and the main
//!   thread's `[stack]` ([`DataMaps::Stacks`]): not the mapped data files (fonts, locale
//!   archives, databases) nor the inaccessible reservations under each thread stack (guard
//!   pages), which would grow the file for nothing.
//!
//! The main thread's stack grows on demand up to `RLIMIT_STACK`, which its mapping does not
//! show; it is recorded as a copy of the `Max stack size` line of `/proc/PID/limits` in a
//! [`Blob`] named [`limits_blob_name`]`(pid)`, once per process when its mappings are read
//! from /proc (at an exec, or when the recording first meets it). Costs nothing per sample.

use crossprof_format::{Blob, Mmap, Record};

/// Which data mappings a recording keeps (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataMaps {
    /// None: code mappings only.
    None,
    /// The anonymous writable mappings and `[stack]`: where stacks live (stack-copy samples).
    Stacks,
    /// Every data mapping (fault events).
    All,
}

impl DataMaps {
    /// What a recording of `faults` (a fault event is sampled) and `stack_copies` (samples
    /// carry registers and a stack copy) keeps.
    pub fn new(faults: bool, stack_copies: bool) -> DataMaps {
        match (faults, stack_copies) {
            (true, _) => DataMaps::All,
            (false, true) => DataMaps::Stacks,
            (false, false) => DataMaps::None,
        }
    }

    /// Whether the kernel must report data mappings (`mmap_data`) at all.
    pub fn wanted(self) -> bool {
        self != DataMaps::None
    }

    /// Whether the mapping record `m` (from the kernel, or from /proc with `from_proc`) is
    /// written. Code mappings always are; from /proc only file-backed ones (anonymous code
    /// comes from a JIT, which names it in its own maps), and never guard pages (prot 0):
    /// readers made before protection bits were recorded take such a mapping for code.
    pub fn keeps(self, m: &Mmap, from_proc: bool) -> bool {
        let exec = m.prot & libc::PROT_EXEC as u32 != 0;
        if exec {
            return !from_proc || !m.path.is_empty();
        }
        match self {
            // The kernel reports data mappings only when asked (mmap_data): keep what it says.
            DataMaps::All => !from_proc || m.prot != 0,
            DataMaps::Stacks => m.prot & libc::PROT_WRITE as u32 != 0 && may_hold_stack(&m.path),
            // Without mmap_data the kernel reports none.
            DataMaps::None => !from_proc,
        }
    }
}

/// Whether a mapping named `path` can be a stack: anonymous memory (`//anon` from the kernel,
/// no name in /proc, `[anon:NAME]` when named with prctl) or the main thread's `[stack]`.
fn may_hold_stack(path: &str) -> bool {
    path.is_empty()
        || path.starts_with("//anon")
        || path.starts_with("[stack")
        || path.starts_with("[anon:")
}

/// The name of the blob that carries process `pid`'s stack limit: the path it was read from.
pub fn limits_blob_name(pid: u32) -> String {
    format!("/proc/{pid}/limits")
}

/// The `Max stack size` line of `/proc/PID/limits` (soft and hard limits in bytes, or
/// `unlimited`) in a blob, `None` when the process is gone or the line is missing.
pub fn stack_limit(pid: u32) -> Option<Record> {
    let text = std::fs::read_to_string(limits_blob_name(pid)).ok()?;
    let line = text.lines().find(|l| l.starts_with("Max stack size"))?;
    Some(Record::Blob(Blob {
        name: limits_blob_name(pid),
        addr: 0,
        data: format!("{}\n", line.trim_end()).into_bytes(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(path: &str, prot: u32) -> Mmap {
        Mmap {
            path: path.into(),
            prot,
            ..Default::default()
        }
    }

    #[test]
    fn stack_copies_keep_only_what_can_be_a_stack() {
        let s = DataMaps::Stacks;
        assert!(s.keeps(&map("//anon", 3), false), "a thread stack");
        assert!(s.keeps(&map("", 3), true), "a thread stack in /proc");
        assert!(s.keeps(&map("[stack]", 3), true));
        assert!(!s.keeps(&map("//anon", 0), false), "a guard page");
        assert!(!s.keeps(&map("/usr/share/fonts/a.ttf", 1), false));
        assert!(
            !s.keeps(&map("/var/db", 3), false),
            "a writable mapped file"
        );
        assert!(s.keeps(&map("/usr/bin/app", 5), false), "code");
        assert!(!s.keeps(&map("", 7), true), "JIT code from /proc");
    }

    #[test]
    fn fault_events_keep_every_data_mapping() {
        let a = DataMaps::All;
        assert!(a.keeps(&map("/usr/share/fonts/a.ttf", 1), false));
        assert!(a.keeps(&map("//anon", 0), false));
        assert!(!a.keeps(&map("", 0), true), "a guard page in /proc");
        assert!(!DataMaps::None.keeps(&map("[heap]", 3), true));
    }

    #[test]
    fn own_stack_limit_is_one_line() {
        let Some(Record::Blob(b)) = stack_limit(std::process::id()) else {
            panic!("no limit");
        };
        let text = String::from_utf8_lossy(&b.data);
        assert!(
            text.starts_with("Max stack size") && text.ends_with("bytes\n"),
            "{text}"
        );
    }
}
